package scenario

import (
	"fmt"
	"strings"
	"testing"
)

// TestMarkCounter counts marks however the stream is cut into writes.
func TestMarkCounter(t *testing.T) {
	const mark = `{"metadata":{"name":"web-`
	body := `{"items":[` + strings.Repeat(mark+`00001"},`, 7) + mark + `x"}]}`
	for _, size := range []int{1, 2, 5, len(mark) - 1, len(mark), len(mark) + 1, 64, len(body)} {
		t.Run(fmt.Sprintf("write=%d", size), func(t *testing.T) {
			c := &markCounter{mark: []byte(mark)}
			for b := []byte(body); len(b) > 0; {
				n := min(size, len(b))
				c.Write(b[:n])
				b = b[n:]
			}
			if c.n != 8 {
				t.Errorf("counted %d, want 8", c.n)
			}
		})
	}
}
