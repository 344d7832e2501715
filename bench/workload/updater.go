package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Write is one update the updater made: which Pod, the resourceVersion the
// apiserver gave it, and when the update call returned (the write was
// acknowledged). Latency is measured from Ack: a receiver looks the event
// up by its resourceVersion, which is unique per write cluster-wide.
type Write struct {
	Pod int
	RV  uint64
	// Sent is when the update request was made (the StampAnnotation value);
	// Ack is when its response had been read.
	Sent, Ack time.Time
}

// UpdatePlan says how many updates to write and how fast.
type UpdatePlan struct {
	// Count is the number of updates.
	Count int
	// Rate is updates per second; 0 writes as fast as Workers allow.
	Rate float64
	// Workers are concurrent update requests. Default 8.
	Workers int
	// Retry makes a worker retry a failed write (every 100ms, until ctx
	// ends) instead of ending the run, for writes through a kube-apiserver
	// restart. A write whose response was lost may have been applied; it
	// is then not in the record, and its retry is.
	Retry bool
	// OnAck, if set, is called with every acknowledged write, from the
	// worker that made it, right after its Ack time was taken (the floor
	// arm publishes it then). It must be quick and safe for concurrent
	// use.
	OnAck func(Write)
}

// Update writes plan.Count merge patches to the Pods (round-robin over
// pods), each setting StampAnnotation to the time it was sent, and returns
// every write with its resourceVersion and acknowledgement time, plus the
// time from the first send to the last acknowledgement. A write that fails
// ends the run with its error.
func Update(ctx context.Context, c kubernetes.Interface, pods []PodKey, plan UpdatePlan) ([]Write, time.Duration, error) {
	if plan.Workers <= 0 {
		plan.Workers = 8
	}
	jobs := make(chan int)
	var (
		mu       sync.Mutex
		writes   = make([]Write, 0, plan.Count)
		firstErr error
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range plan.Workers {
		wg.Go(func() {
			for j := range jobs {
				key := pods[j%len(pods)]
				var (
					sent, ack time.Time
					rv        uint64
					err       error
				)
				for {
					sent = time.Now()
					patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, StampAnnotation, sent.UTC().Format(time.RFC3339Nano))
					var raw []byte
					raw, err = c.CoreV1().RESTClient().Patch(types.MergePatchType).
						Namespace(key.Namespace).Resource("pods").Name(key.Name).
						Body([]byte(patch)).Do(ctx).Raw()
					ack = time.Now()
					if err == nil {
						rv, err = ResourceVersion(raw)
					}
					if err == nil || !plan.Retry || ctx.Err() != nil {
						break
					}
					select {
					case <-time.After(100 * time.Millisecond):
					case <-ctx.Done():
					}
				}
				if err == nil && plan.OnAck != nil {
					plan.OnAck(Write{Pod: j % len(pods), RV: rv, Sent: sent, Ack: ack})
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("update %s/%s: %w", key.Namespace, key.Name, err)
						cancel()
					}
				} else {
					writes = append(writes, Write{Pod: j % len(pods), RV: rv, Sent: sent, Ack: ack})
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	for j := range plan.Count {
		if plan.Rate > 0 {
			due := start.Add(time.Duration(float64(j) / plan.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
		}
		select {
		case jobs <- j:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return writes, elapsed, firstErr
}

// ResourceVersion reads metadata.resourceVersion from an object's JSON.
func ResourceVersion(raw []byte) (uint64, error) {
	var o struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return 0, err
	}
	if o.Metadata.ResourceVersion == "" {
		return 0, errors.New("no resourceVersion in response")
	}
	return strconv.ParseUint(o.Metadata.ResourceVersion, 10, 64)
}
