package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

const stateFile = "state.json"

// state is what Load needs to reattach to a running control plane. It
// holds bearer tokens, so it is written with mode 0600.
type state struct {
	AssetsDir           string            `json:"assetsDir"`
	Detach              bool              `json:"detach"`
	Ports               ports             `json:"ports"`
	Users               []User            `json:"users"`
	ExtraAPIServerFlags map[string]string `json:"extraAPIServerFlags,omitempty"`
	ReadyTimeout        time.Duration     `json:"readyTimeout"`
	EtcdPID             int               `json:"etcdPID,omitempty"`
	APIServerPID        int               `json:"apiServerPID,omitempty"`
}

// ErrNoState is wrapped by the error Load returns when the directory holds
// no control plane state.
var ErrNoState = errors.New("no control plane state")

// saveStateLocked records ports, users and pids in the data dir. Caller
// must hold mu.
func (cp *ControlPlane) saveStateLocked() error {
	st := state{
		AssetsDir:           cp.assetsDir,
		Detach:              cp.detach,
		Ports:               cp.ports,
		Users:               cp.users,
		ExtraAPIServerFlags: cp.extraFlags,
		ReadyTimeout:        cp.readyTimeout,
	}
	if cp.etcd != nil {
		st.EtcdPID = cp.etcd.pid
	}
	if cp.apiServer != nil {
		st.APIServerPID = cp.apiServer.pid
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	// Write and rename so a reader never sees half a file.
	path := filepath.Join(cp.dataDir, stateFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

// Load reattaches to the control plane whose data directory is dataDir,
// typically one started with Options.Detach by another process. Processes
// recorded there that are no longer running count as stopped; check Ready
// to see whether the control plane serves. Stop on the result stops the
// processes by pid and never removes dataDir.
func Load(dataDir string) (*ControlPlane, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("load %s: %w", dir, ErrNoState)
	}
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("load %s: decode %s: %w", dir, stateFile, err)
	}
	if len(st.Users) == 0 || st.Users[0].Name != AdminUser {
		return nil, fmt.Errorf("load %s: %s has no %s user", dir, stateFile, AdminUser)
	}
	cp := &ControlPlane{
		assetsDir:    st.AssetsDir,
		dataDir:      dir,
		detach:       st.Detach,
		readyTimeout: st.ReadyTimeout,
		extraFlags:   st.ExtraAPIServerFlags,
		users:        st.Users,
		ports:        st.Ports,
	}
	if cp.extraFlags == nil {
		cp.extraFlags = map[string]string{}
	}
	if cp.readyTimeout <= 0 {
		cp.readyTimeout = 90 * time.Second
	}
	if cp.caPEM, err = os.ReadFile(cp.pki(caCertFile)); err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	if err := cp.initProbe(); err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	cp.etcd = cp.reattach(EtcdBinary, st.EtcdPID)
	cp.apiServer = cp.reattach(APIServerBinary, st.APIServerPID)
	return cp, nil
}

// reattach returns the recorded process if it still runs, else nil.
func (cp *ControlPlane) reattach(name string, pid int) *process {
	path := filepath.Join(cp.assetsDir, name)
	if !processAlive(pid, path) {
		return nil
	}
	return &process{name: name, path: path, pid: pid, logPath: filepath.Join(cp.dataDir, name+".log")}
}
