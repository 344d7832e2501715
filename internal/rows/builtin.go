package rows

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"kubegate/internal/cell"
)

// The cells of the built-in columns that count from a time in the
// object (see live.go), computed as kube-apiserver's printers compute
// them (k8s.io/kubernetes/pkg/printers/internalversion, which works on
// the apiserver's internal types and cannot be imported without
// k8s.io/kubernetes). Only the live cells are kept from what these
// compute: the others arrive printed by kube-apiserver itself. An object
// is decoded only for a live cell of its kind that needs it.

func restartableInit(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func podCondition(s *corev1.PodStatus, t corev1.PodConditionType) (corev1.ConditionStatus, bool) {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status, true
		}
	}
	return "", false
}

// podCells follows the apiserver's printPod: READY counts ready
// containers (and started restartable init containers), STATUS is the
// most telling reason, RESTARTS adds when the last restart was.
func podCells(pod *corev1.Pod) ([]Cell, []metav1.TableRowCondition) {
	restarts, sidecarRestarts := 0, 0
	total := len(pod.Spec.Containers)
	ready := 0
	var lastRestart, lastSidecarRestart metav1.Time

	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}
	var conds []metav1.TableRowCondition
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		conds = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue,
			Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		conds = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue,
			Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}

	inits := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		inits[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
		if restartableInit(&pod.Spec.InitContainers[i]) {
			total++
		}
	}
	later := func(last *metav1.Time, cs corev1.ContainerStatus) {
		if t := cs.LastTerminationState.Terminated; t != nil && last.Before(&t.FinishedAt) {
			*last = t.FinishedAt
		}
	}
	initializing := false
	for i, c := range pod.Status.InitContainerStatuses {
		restarts += int(c.RestartCount)
		later(&lastRestart, c)
		sidecar := restartableInit(inits[c.Name])
		if sidecar {
			sidecarRestarts += int(c.RestartCount)
			later(&lastSidecarRestart, c)
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecar && c.Started != nil && *c.Started:
			if c.Ready {
				ready++
			}
			continue
		case c.State.Terminated != nil:
			switch t := c.State.Terminated; {
			case t.Reason != "":
				reason = "Init:" + t.Reason
			case t.Signal != 0:
				reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if initialized, _ := podCondition(&pod.Status, corev1.PodInitialized); !initializing || initialized == corev1.ConditionTrue {
		restarts, lastRestart = sidecarRestarts, lastSidecarRestart
		running := false
		errorReason := ""
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := pod.Status.ContainerStatuses[i]
			restarts += int(c.RestartCount)
			later(&lastRestart, c)
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil:
				switch t := c.State.Terminated; {
				case t.Reason != "":
					reason = t.Reason
				case t.Signal != 0:
					reason = fmt.Sprintf("Signal:%d", t.Signal)
				default:
					reason = fmt.Sprintf("ExitCode:%d", t.ExitCode)
				}
				if c.State.Terminated.ExitCode != 0 {
					errorReason = reason
				}
			case c.Ready && c.State.Running != nil:
				running = true
				ready++
			}
		}
		if reason == "Completed" {
			podReady, _ := podCondition(&pod.Status, corev1.PodReady)
			switch {
			case running && podReady == corev1.ConditionTrue:
				reason = "Running"
			case errorReason != "":
				reason = errorReason
			case running:
				reason = "NotReady"
			}
		}
	}
	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	switch {
	case pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost":
		reason = "Unknown"
	case pod.DeletionTimestamp != nil && !terminal:
		reason = "Terminating"
	}

	// "2 (5m ago)": the count, and the time since the last restart.
	restartsCell := count(strconv.Itoa(restarts), int64(restarts))
	if restarts != 0 && !lastRestart.IsZero() {
		restartsCell = Cell{Prefix: strconv.Itoa(restarts) + " (", Since: lastRestart.Time, Suffix: " ago)", relative: true,
			Typed: cell.Int(int64(restarts))}
	}
	ip := "<none>"
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != "" {
		ip = pod.Status.PodIPs[0].IP
	}
	gates := "<none>"
	if n := len(pod.Spec.ReadinessGates); n > 0 {
		met := 0
		for _, g := range pod.Spec.ReadinessGates {
			if st, _ := podCondition(&pod.Status, g.ConditionType); st == corev1.ConditionTrue {
				met++
			}
		}
		gates = fmt.Sprintf("%d/%d", met, n)
	}
	return []Cell{text(pod.Name), count(fmt.Sprintf("%d/%d", ready, total), int64(ready)), text(reason), restartsCell,
		since(pod.CreationTimestamp.Time), text(ip), text(orNone(pod.Spec.NodeName)), text(orNone(pod.Status.NominatedNodeName)),
		text(gates)}, conds
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// Deployments and ReplicaSets.

func eventCells(e *corev1.Event) ([]Cell, []metav1.TableRowCondition) {
	first := since(e.FirstTimestamp.Time)
	if e.FirstTimestamp.IsZero() {
		first = since(e.EventTime.Time)
	}
	last := since(e.LastTimestamp.Time)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	n := e.Count
	if e.Series != nil {
		last = since(e.Series.LastObservedTime.Time)
		n = e.Series.Count
	} else if n == 0 {
		n = 1 // singleton events of the events.k8s.io API have none
	}
	target := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		target += "/" + e.InvolvedObject.Name
	}
	component, instance := e.Source.Component, e.Source.Host
	if component == "" {
		component = e.ReportingController
	}
	if instance == "" {
		instance = e.ReportingInstance
	}
	source := component
	if instance != "" {
		source += ", " + instance
	}
	return []Cell{last, text(e.Type), text(e.Reason), text(target), text(e.InvolvedObject.FieldPath), text(source),
		text(strings.TrimSpace(e.Message)), first, integer(int64(n)), text(e.Name)}, nil
}

// Jobs and CronJobs.

func jobCells(j *batchv1.Job) ([]Cell, []metav1.TableRowCondition) {
	var completions string
	switch {
	case j.Spec.Completions != nil:
		completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	case j.Spec.Parallelism != nil && *j.Spec.Parallelism > 1:
		completions = fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *j.Spec.Parallelism)
	default:
		completions = fmt.Sprintf("%d/1", j.Status.Succeeded)
	}
	// A finished job took a fixed time (it sorts as seconds); a running
	// one counts from its start (it sorts as the start time).
	var took Cell
	switch {
	case j.Status.StartTime == nil:
		took = Cell{Raw: []byte(`""`)}
	case j.Status.CompletionTime == nil:
		took = Cell{Since: j.Status.StartTime.Time, relative: true, Typed: cell.Time(j.Status.StartTime.Time)}
	default:
		d := j.Status.CompletionTime.Sub(j.Status.StartTime.Time)
		took = count(duration.HumanDuration(d), int64(d/time.Second))
	}
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == t {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	var status string
	switch {
	case has(batchv1.JobComplete):
		status = "Complete"
	case has(batchv1.JobFailed):
		status = "Failed"
	case j.DeletionTimestamp != nil:
		status = "Terminating"
	case has(batchv1.JobSuspended):
		status = "Suspended"
	case has(batchv1.JobFailureTarget):
		status = "FailureTarget"
	case has(batchv1.JobSuccessCriteriaMet):
		status = "SuccessCriteriaMet"
	default:
		status = "Running"
	}
	names, images := containerCells(j.Spec.Template.Spec.Containers)
	return []Cell{text(j.Name), text(status), count(completions, int64(j.Status.Succeeded)), took, since(j.CreationTimestamp.Time),
		text(names), text(images), text(metav1.FormatLabelSelector(j.Spec.Selector))}, nil
}

func cronJobCells(cj *batchv1.CronJob) ([]Cell, []metav1.TableRowCondition) {
	last := Cell{Raw: []byte(`"<none>"`)} // never scheduled: missing when sorted
	if cj.Status.LastScheduleTime != nil {
		last = since(cj.Status.LastScheduleTime.Time)
	}
	tz := "<none>"
	if cj.Spec.TimeZone != nil {
		tz = *cj.Spec.TimeZone
	}
	suspend := "<unset>"
	if cj.Spec.Suspend != nil {
		suspend = "False"
		if *cj.Spec.Suspend {
			suspend = "True"
		}
	}
	tmpl := cj.Spec.JobTemplate.Spec
	names, images := containerCells(tmpl.Template.Spec.Containers)
	return []Cell{text(cj.Name), text(cj.Spec.Schedule), text(tz), text(suspend), integer(int64(len(cj.Status.Active))), last,
		since(cj.CreationTimestamp.Time), text(names), text(images), text(metav1.FormatLabelSelector(tmpl.Selector))}, nil
}

func containerCells(cs []corev1.Container) (names, images string) {
	n := make([]string, len(cs))
	im := make([]string, len(cs))
	for i, c := range cs {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// count is a cell shown as text ("2/3") that sorts as the number n.
func count(s string, n int64) Cell {
	c := text(s)
	c.Typed = cell.Count(n, s)
	return c
}

// integer is a cell holding the integer i.
func integer(i int64) Cell {
	return Cell{Raw: strconv.AppendInt(nil, i, 10), Typed: cell.Int(i)}
}
