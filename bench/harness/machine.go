package harness

import (
	"fmt"
	"os"
	"runtime"
	"time"
)

// Machine describes where figures were measured.
type Machine struct {
	Hostname  string `json:"hostname,omitempty"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel,omitempty"`
	MemTotal  string `json:"memTotal,omitempty"`
	GoVersion string `json:"goVersion"`
	Started   string `json:"started"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute averages when the run
	// started: the machine may be shared.
	LoadAvg string `json:"loadAvg,omitempty"`
}

// DescribeMachine reads the CPU model, memory and load from /proc.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Started: time.Now().UTC().Format(time.RFC3339)}
	m.Hostname, _ = os.Hostname()
	fs, err := proc()
	if err != nil {
		return m
	}
	m.CPUModel = cpuModel(fs)
	if mem, err := fs.Meminfo(); err == nil && mem.MemTotal != nil {
		m.MemTotal = fmt.Sprintf("%d kB", *mem.MemTotal)
	}
	if l, err := fs.LoadAvg(); err == nil {
		m.LoadAvg = fmt.Sprintf("%.2f %.2f %.2f", l.Load1, l.Load5, l.Load15)
	}
	return m
}
