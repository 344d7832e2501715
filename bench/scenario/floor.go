package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"kubegate/bench/workload"
	"kubegate/internal/controlplane"
)

// The floor arm of broad fan-out: the same frames written to the same kind
// of sockets by the least code that can do it, so the gateway's CPU per
// delivery can be read as a multiple of what the writes themselves cost.
//
// The floor is a separate process, so its CPU is read from /proc as the
// gateway's is: this package's executable started again with floorEnv set
// (cmd/kubegate-bench and the package's TestMain call RunFloorIfAsked
// first). It accepts WebSocket connections on loopback with the
// subprotocol kubegate.v1 (coder/websocket, as the gateway), answers one
// subscribe frame with an ack, and then, for every resourceVersion the
// harness sends it on its stdin, encodes one MODIFIED frame around the
// Pod JSON it was given and writes it to every socket from one plain loop.
// No informer, no filter, no queue: a socket that does not read stalls the
// loop, which is acceptable only because the broad scenario's subscribers
// all read.
//
// The harness tells the floor of each write as the writer's request to
// kube-apiserver is acknowledged, so the floor sends frames at the same
// rate and with the same resourceVersions as the gateway, and the same
// receivers check them. Its latency is from that acknowledgement, with no
// watch in between; only its CPU is meant for comparison.

// floorEnv, when set in the environment, makes RunFloorIfAsked serve as
// the floor.
const floorEnv = "KUBEGATE_BENCH_FLOOR"

// wsSubID is the subscription id the gateway arm's subscribers use, and
// the only one the floor accepts.
const wsSubID = "s"

// RunFloorIfAsked serves as the floor of broad fan-out and exits when the
// process was started as one (floorEnv set); otherwise it returns at once.
// Call it first in main (and TestMain) of any program that runs the
// harness: the harness starts the floor from its own executable.
func RunFloorIfAsked() {
	if os.Getenv(floorEnv) == "" {
		return
	}
	if err := serveFloor(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// floorConns are the floor's subscribed sockets. The publishing loop
// takes a copy of the list for each frame.
type floorConns struct {
	mu    sync.Mutex // guards conns
	conns map[*websocket.Conn]struct{}
}

// join acknowledges c's subscription with ack and adds c to the list in
// one step under the lock, so that every list taken after the subscriber
// read its ack holds c, and no frame overtakes the ack.
func (f *floorConns) join(ctx context.Context, c *websocket.Conn, ack []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := c.Write(ctx, websocket.MessageText, ack); err != nil {
		return err
	}
	f.conns[c] = struct{}{}
	return nil
}

func (f *floorConns) remove(c *websocket.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

func (f *floorConns) list(dst []*websocket.Conn) []*websocket.Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	dst = dst[:0]
	for c := range f.conns {
		dst = append(dst, c)
	}
	return dst
}

// serveFloor is the floor process: it prints its /ws URL on out, reads the
// object JSON from the first line of in, then one resourceVersion per line,
// and publishes a frame for each. It returns when in ends.
func serveFloor(in io.Reader, out io.Writer) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	conns := &floorConns{conns: map[*websocket.Conn]struct{}{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The handlers hold hijacked sockets, which srv.Close does not
	// track: they are counted here and waited for.
	var (
		hmu      sync.Mutex // guards closing and handlers.Add
		closing  bool
		handlers sync.WaitGroup
	)
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hmu.Lock()
			if closing {
				hmu.Unlock()
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			handlers.Add(1)
			hmu.Unlock()
			defer handlers.Done()
			serveFloorSocket(ctx, w, r, conns)
		}),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer func() {
		hmu.Lock()
		closing = true
		hmu.Unlock()
		cancel()
		_ = srv.Close()
		for _, c := range conns.list(nil) {
			_ = c.CloseNow()
		}
		handlers.Wait()
		<-served
	}()
	if _, err := fmt.Fprintf(out, "ws://%s/ws\n", l.Addr()); err != nil {
		return err
	}

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	if !sc.Scan() {
		return fmt.Errorf("no object on stdin: %v", sc.Err())
	}
	obj := bytes.TrimSpace(append([]byte(nil), sc.Bytes()...))
	prefix := []byte(`{"type":"MODIFIED","id":"` + wsSubID + `","rv":"`)
	var (
		frame []byte
		list  []*websocket.Conn
	)
	for sc.Scan() {
		rv := bytes.TrimSpace(sc.Bytes())
		frame = append(frame[:0], prefix...)
		frame = append(frame, rv...)
		frame = append(frame, `","object":`...)
		frame = append(frame, obj...)
		frame = append(frame, '}')
		list = conns.list(list)
		for _, c := range list {
			if err := c.Write(context.Background(), websocket.MessageText, frame); err != nil {
				conns.remove(c)
				_ = c.CloseNow()
			}
		}
	}
	return sc.Err()
}

// serveFloorSocket accepts one subscriber, acknowledges its subscription
// and holds the socket (reading, so that a close is noticed) until it goes.
func serveFloorSocket(ctx context.Context, w http.ResponseWriter, r *http.Request, conns *floorConns) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"kubegate.v1"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	_, msg, err := c.Read(ctx)
	if err != nil {
		return
	}
	var f struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	if json.Unmarshal(msg, &f) != nil || f.Type != "subscribe" || f.ID != wsSubID {
		_ = c.Close(websocket.StatusPolicyViolation, "the floor takes one subscribe frame with id "+strconv.Quote(wsSubID))
		return
	}
	if err := conns.join(ctx, c, []byte(`{"type":"ack","id":"`+wsSubID+`","request":"subscribe"}`)); err != nil {
		return
	}
	defer conns.remove(c)
	for {
		if _, _, err := c.Read(ctx); err != nil {
			return
		}
	}
}

// floorProcess is a running floor. One goroutine waits for the process
// and closes done; stop returns after it has.
type floorProcess struct {
	url string
	pid int

	cmd     *exec.Cmd
	mu      sync.Mutex // guards stdin: the writer's workers publish concurrently
	stdin   io.WriteCloser
	logPath string
	done    chan struct{}
	waitErr error // written before done is closed
}

// startFloor starts the floor from this executable and hands it obj, the
// object its frames carry. Its log goes to dir.
func startFloor(obj []byte, dir string) (*floorProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	logPath := filepath.Join(dir, "floor.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), floorEnv+"=1")
	cmd.Stderr = logFile
	cmd.SysProcAttr = controlplane.ChildProcAttr(false)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start floor: %w", err)
	}
	f := &floorProcess{pid: cmd.Process.Pid, cmd: cmd, stdin: stdin, logPath: logPath, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		// The first line is the URL; the rest (none expected) is drained
		// so the floor never blocks on its stdout.
		br := bufio.NewReader(stdout)
		line, _ := br.ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, br)
	}()
	go func() {
		f.waitErr = cmd.Wait()
		logFile.Close()
		close(f.done)
	}()
	select {
	case f.url = <-lines:
	case <-time.After(30 * time.Second):
	}
	if !strings.HasPrefix(f.url, "ws://") {
		f.stop()
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("floor did not start (first line %q): %s", f.url, bytes.TrimSpace(b))
	}
	if err := f.send(bytes.TrimSpace(obj)); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

// send writes one line to the floor's stdin.
func (f *floorProcess) send(line []byte) error {
	if bytes.IndexByte(line, '\n') >= 0 {
		return errors.New("floor: a line must not contain a newline")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.stdin.Write(line); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	_, err := f.stdin.Write([]byte{'\n'})
	return err
}

// publish makes the floor write one frame with resourceVersion rv to
// every socket.
func (f *floorProcess) publish(rv uint64) error {
	return f.send(strconv.AppendUint(nil, rv, 10))
}

// stop closes the floor's stdin, which ends it, and waits for it (killing
// it after 10s).
func (f *floorProcess) stop() {
	f.mu.Lock()
	_ = f.stdin.Close()
	f.mu.Unlock()
	select {
	case <-f.done:
		return
	case <-time.After(10 * time.Second):
	}
	_ = f.cmd.Process.Kill()
	<-f.done
}

// floorArm is the broad scenario's floor: gateway-arm subscribers (the
// same dialer and receivers) on a floor process started by Open and
// stopped by Close. It is told of every write as it is acknowledged.
type floorArm struct {
	env   *Env
	ws    *wsArm
	proc  *floorProcess
	errMu sync.Mutex // guards err
	err   error      // the first failed publish
}

func newFloorArm(env *Env) *floorArm { return &floorArm{env: env} }

func (a *floorArm) Name() string { return ArmFloor }

// Open starts the floor with the JSON of one of the workload's Pods as
// the gateway serves it, so its frames are the size of the gateway's.
func (a *floorArm) Open(ctx context.Context, subs []*subscriber, rv uint64) error {
	key := workload.PodAt(0, len(a.env.Namespaces))
	obj, err := httpGet(ctx, a.env.GatewayURL+"/api/v1/namespaces/"+key.Namespace+"/pods/"+key.Name)
	if err != nil {
		return fmt.Errorf("floor: the object its frames carry: %w", err)
	}
	if a.proc, err = startFloor(obj, a.env.Dir); err != nil {
		return err
	}
	a.ws = &wsArm{url: a.proc.url}
	return a.ws.Open(ctx, subs, rv)
}

// observe publishes w on the floor; runFanout calls it for every
// acknowledged write.
func (a *floorArm) observe(w workload.Write) {
	if err := a.proc.publish(w.RV); err != nil {
		a.errMu.Lock()
		if a.err == nil {
			a.err = err
		}
		a.errMu.Unlock()
	}
}

// serverPID is the floor's process, valid once Open has returned.
func (a *floorArm) serverPID() int { return a.proc.pid }

func (a *floorArm) Close() {
	if a.ws != nil {
		a.ws.Close()
	}
	if a.proc != nil {
		a.proc.stop()
	}
}

// Err is the first publish that failed, if any.
func (a *floorArm) Err() error {
	a.errMu.Lock()
	defer a.errMu.Unlock()
	return a.err
}
