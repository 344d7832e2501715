package soak

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sync"
)

// BuildGateway builds cmd/gateway into dir and returns the binary's path.
// race builds it with the race detector.
func BuildGateway(ctx context.Context, dir string, race bool) (string, error) {
	bin := dir + "/gateway"
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "kubegate/cmd/gateway")
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build gateway: %v\n%s", err, out)
	}
	return bin, nil
}

// warnLines keeps the first max lines of JSON log output whose level is
// warn or above, for the report.
type warnLines struct {
	mu      sync.Mutex // guards the fields below
	max     int
	partial []byte
	lines   []string
	dropped int
}

func (w *warnLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := w.partial[:i]
		if bytes.Contains(line, []byte(`"level":"warn"`)) || bytes.Contains(line, []byte(`"level":"error"`)) {
			if len(w.lines) < w.max {
				w.lines = append(w.lines, string(line))
			} else {
				w.dropped++
			}
		}
		w.partial = append(w.partial[:0], w.partial[i+1:]...)
	}
	return len(p), nil
}

func (w *warnLines) get() ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...), w.dropped
}
