package rows

import (
	"github.com/go-json-experiment/json/jsontext"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"kubegate/internal/cell"
	"kubegate/internal/informer"
)

// The built-in cells that count from a time in the object (see live.go),
// computed as kube-apiserver's printers compute them
// (k8s.io/kubernetes/pkg/printers/internalversion, which works on the
// apiserver's internal types and cannot be imported without
// k8s.io/kubernetes). Every other cell arrives printed by kube-apiserver
// itself. An object is decoded only for a live cell of its kind that
// needs it, and then only into the few fields the cell reads: a pod's
// full decode costs about ten times more than its restarts' fields.

// slim decodes o's JSON into a T that names only the fields wanted; the
// rest is skipped. It returns nil when o does not decode.
func slim[T any](o *informer.Object) *T {
	t := new(T)
	if jsonv2.Unmarshal(o.Raw, t, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) != nil {
		return nil
	}
	return t
}

// podRestartFields are the fields of a pod its RESTARTS cell reads.
type podRestartFields struct {
	Spec struct {
		InitContainers []struct {
			Name          string  `json:"name"`
			RestartPolicy *string `json:"restartPolicy"`
		} `json:"initContainers"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		InitContainerStatuses []containerRestarts `json:"initContainerStatuses"`
		ContainerStatuses     []containerRestarts `json:"containerStatuses"`
	} `json:"status"`
}

type containerRestarts struct {
	Name         string `json:"name"`
	RestartCount int32  `json:"restartCount"`
	Started      *bool  `json:"started"`
	State        struct {
		Terminated *struct {
			ExitCode int32 `json:"exitCode"`
		} `json:"terminated"`
	} `json:"state"`
	LastState struct {
		Terminated *struct {
			FinishedAt metav1.Time `json:"finishedAt"`
		} `json:"terminated"`
	} `json:"lastState"`
}

// podRestartCell follows the apiserver's printPod for RESTARTS: the
// restarts of the containers (of the restartable init containers too,
// and of the others while the pod initializes), and "N (5m ago)" since
// the last one when there was one.
func podRestartCell(pod *podRestartFields) Cell {
	restarts, sidecarRestarts := 0, 0
	var lastRestart, lastSidecarRestart metav1.Time
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		sidecars[c.Name] = c.RestartPolicy != nil && *c.RestartPolicy == "Always"
	}
	later := func(last *metav1.Time, c containerRestarts) {
		if t := c.LastState.Terminated; t != nil && last.Before(&t.FinishedAt) {
			*last = t.FinishedAt
		}
	}
	initializing := false
	for _, c := range pod.Status.InitContainerStatuses {
		restarts += int(c.RestartCount)
		later(&lastRestart, c)
		sidecar := sidecars[c.Name]
		if sidecar {
			sidecarRestarts += int(c.RestartCount)
			later(&lastSidecarRestart, c)
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecar && c.Started != nil && *c.Started:
			continue
		}
		initializing = true
		break
	}
	initialized := false
	for _, c := range pod.Status.Conditions {
		if c.Type == "Initialized" {
			initialized = c.Status == "True"
		}
	}
	if !initializing || initialized {
		restarts, lastRestart = sidecarRestarts, lastSidecarRestart
		for _, c := range pod.Status.ContainerStatuses {
			restarts += int(c.RestartCount)
			later(&lastRestart, c)
		}
	}
	if restarts != 0 && !lastRestart.IsZero() {
		return Cell{Prefix: strconv.Itoa(restarts) + " (", Since: lastRestart.Time, Suffix: " ago)", relative: true,
			Typed: cell.Int(int64(restarts))}
	}
	return count(strconv.Itoa(restarts), int64(restarts))
}

// jobDurationFields are the fields of a job its DURATION cell reads.
type jobDurationFields struct {
	Status struct {
		StartTime      *metav1.Time `json:"startTime"`
		CompletionTime *metav1.Time `json:"completionTime"`
	} `json:"status"`
}

// jobDurationCell follows printJob's DURATION: none before the job
// started, since its start while it runs (sorted as the start time), the
// time it took once finished (sorted as seconds).
func jobDurationCell(j *jobDurationFields) Cell {
	switch st := j.Status; {
	case st.StartTime == nil:
		return Cell{Raw: []byte(`""`)}
	case st.CompletionTime == nil:
		return since(st.StartTime.Time)
	default:
		d := st.CompletionTime.Sub(st.StartTime.Time)
		return count(duration.HumanDuration(d), int64(d/time.Second))
	}
}

// cronJobScheduleFields are the fields of a cronjob its LAST SCHEDULE
// cell reads.
type cronJobScheduleFields struct {
	Status struct {
		LastScheduleTime *metav1.Time `json:"lastScheduleTime"`
	} `json:"status"`
}

// cronJobScheduleCell is LAST SCHEDULE: since the last schedule, or
// "<none>" (missing when sorted).
func cronJobScheduleCell(cj *cronJobScheduleFields) Cell {
	if cj.Status.LastScheduleTime == nil {
		return Cell{Raw: []byte(`"\u003cnone\u003e"`)}
	}
	return since(cj.Status.LastScheduleTime.Time)
}

// eventSeenFields are the fields of an event its LAST SEEN and FIRST
// SEEN cells read, in core/v1 and in events.k8s.io/v1 (the deprecated*
// names), both printed from the same internal type.
type eventSeenFields struct {
	FirstTimestamp           metav1.Time      `json:"firstTimestamp"`
	LastTimestamp            metav1.Time      `json:"lastTimestamp"`
	DeprecatedFirstTimestamp metav1.Time      `json:"deprecatedFirstTimestamp"`
	DeprecatedLastTimestamp  metav1.Time      `json:"deprecatedLastTimestamp"`
	EventTime                metav1.MicroTime `json:"eventTime"`
	Series                   *struct {
		LastObservedTime metav1.MicroTime `json:"lastObservedTime"`
	} `json:"series"`
}

// eventSeenCells follows printEvent: FIRST SEEN is the first timestamp,
// else the event time; LAST SEEN the last timestamp, else the first
// seen, or the series' last observation when there is a series.
func eventSeenCells(e *eventSeenFields) (last, first Cell) {
	firstTime, lastTime := e.FirstTimestamp, e.LastTimestamp
	if !e.DeprecatedFirstTimestamp.IsZero() {
		firstTime = e.DeprecatedFirstTimestamp
	}
	if !e.DeprecatedLastTimestamp.IsZero() {
		lastTime = e.DeprecatedLastTimestamp
	}
	first = since(firstTime.Time)
	if firstTime.IsZero() {
		first = since(e.EventTime.Time)
	}
	last = since(lastTime.Time)
	if lastTime.IsZero() {
		last = first
	}
	if e.Series != nil {
		last = since(e.Series.LastObservedTime.Time)
	}
	return last, first
}

// count is a cell shown as text ("2/3") that sorts as the number n.
func count(s string, n int64) Cell {
	c := text(s)
	c.Typed = cell.Count(n, s)
	return c
}
