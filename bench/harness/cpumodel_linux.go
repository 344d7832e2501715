package harness

import "github.com/prometheus/procfs"

// cpuModel is the first CPU's model name from /proc/cpuinfo.
func cpuModel(fs procfs.FS) string {
	if cpus, err := fs.CPUInfo(); err == nil && len(cpus) > 0 {
		return cpus[0].ModelName
	}
	return ""
}
