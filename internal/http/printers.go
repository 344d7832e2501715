package httpapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Table columns of common built-in resources, as kube-apiserver prints
// them (k8s.io/kubernetes/pkg/printers/internalversion, which works on
// the apiserver's internal types and cannot be imported without
// k8s.io/kubernetes). Column names, types and priorities are the
// apiserver's, so kubectl prints the same headers; the cells follow its
// rules for the same fields. The apiserver always fills the wide
// (priority 1) cells; so do these.
//
// A printer decodes the stored JSON into the typed object once per row,
// and only when a Table is asked for; lists and watches in JSON never
// decode.

// rowPrinter renders one object's cells from its stored JSON.
type rowPrinter struct {
	columns []metav1.TableColumnDefinition
	// cells returns the row's cells (one per column) and conditions.
	cells func(raw []byte, now time.Time) ([]any, []metav1.TableRowCondition, error)
}

// printer builds a rowPrinter for the typed object T.
func printer[T any](columns []metav1.TableColumnDefinition, cells func(o *T, now time.Time) ([]any, []metav1.TableRowCondition)) rowPrinter {
	return rowPrinter{columns: columns, cells: func(raw []byte, now time.Time) ([]any, []metav1.TableRowCondition, error) {
		o := new(T)
		if err := json.Unmarshal(raw, o); err != nil {
			return nil, nil, err
		}
		c, cond := cells(o, now)
		return c, cond, nil
	}}
}

// builtinPrinters are the resources with their own columns, by exact
// group, version and resource.
var builtinPrinters = map[schema.GroupVersionResource]rowPrinter{
	{Version: "v1", Resource: "pods"}:                        printer(podColumns, podCells),
	{Group: "apps", Version: "v1", Resource: "deployments"}:  printer(deploymentColumns, deploymentCells),
	{Group: "apps", Version: "v1", Resource: "replicasets"}:  printer(replicaSetColumns, replicaSetCells),
	{Version: "v1", Resource: "services"}:                    printer(serviceColumns, serviceCells),
	{Version: "v1", Resource: "configmaps"}:                  printer(configMapColumns, configMapCells),
	{Version: "v1", Resource: "secrets"}:                     printer(secretColumns, secretCells),
	{Version: "v1", Resource: "namespaces"}:                  printer(namespaceColumns, namespaceCells),
	{Version: "v1", Resource: "nodes"}:                       printer(nodeColumns, nodeCells),
	{Version: "v1", Resource: "events"}:                      printer(eventColumns, eventCells),
	{Group: "apps", Version: "v1", Resource: "statefulsets"}: printer(statefulSetColumns, statefulSetCells),
	{Group: "apps", Version: "v1", Resource: "daemonsets"}:   printer(daemonSetColumns, daemonSetCells),
	{Group: "batch", Version: "v1", Resource: "jobs"}:        printer(jobColumns, jobCells),
	{Group: "batch", Version: "v1", Resource: "cronjobs"}:    printer(cronJobColumns, cronJobCells),
}

func col(name, typ string, priority int32, desc string) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: typ, Priority: priority, Description: desc}
	if name == "Name" {
		c.Format = "name"
	}
	return c
}

var (
	nameColumnDef = col("Name", "string", 0, metav1.ObjectMeta{}.SwaggerDoc()["name"])
	ageColumnDef  = col("Age", "string", 0, metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"])
)

// since is the apiserver's translateTimestampSince.
func since(ts metav1.Time, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

func microSince(ts metav1.MicroTime, now time.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}

// Pods.

var podColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
	col("Status", "string", 0, "The aggregate status of the containers in this pod."),
	col("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
	ageColumnDef,
	col("IP", "string", 1, corev1.PodStatus{}.SwaggerDoc()["podIP"]),
	col("Node", "string", 1, corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
	col("Nominated Node", "string", 1, corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
	col("Readiness Gates", "string", 1, corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
}

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
func podCells(pod *corev1.Pod, now time.Time) ([]any, []metav1.TableRowCondition) {
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

	restartsCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsCell = fmt.Sprintf("%d (%s ago)", restarts, since(lastRestart, now))
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
	return []any{pod.Name, fmt.Sprintf("%d/%d", ready, total), reason, restartsCell, since(pod.CreationTimestamp, now),
		ip, orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), gates}, conds
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// Deployments and ReplicaSets.

var deploymentColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Ready", "string", 0, "Number of the pod with ready state"),
	col("Up-to-date", "string", 0, appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]),
	col("Available", "string", 0, appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
	col("Selector", "string", 1, appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]),
}

func deploymentCells(d *appsv1.Deployment, now time.Time) ([]any, []metav1.TableRowCondition) {
	desired := int32(1) // the apiserver's default, for objects stored without it
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	sel := "<invalid>"
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		sel = s.String()
	}
	names, images := containerCells(d.Spec.Template.Spec.Containers)
	return []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired), int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas), since(d.CreationTimestamp, now), names, images, sel}, nil
}

var replicaSetColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Desired", "integer", 0, appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]),
	col("Current", "integer", 0, appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]),
	col("Ready", "integer", 0, appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
	col("Selector", "string", 1, appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]),
}

func replicaSetCells(rs *appsv1.ReplicaSet, now time.Time) ([]any, []metav1.TableRowCondition) {
	desired := int32(1)
	if rs.Spec.Replicas != nil {
		desired = *rs.Spec.Replicas
	}
	names, images := containerCells(rs.Spec.Template.Spec.Containers)
	return []any{rs.Name, int64(desired), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
		since(rs.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(rs.Spec.Selector)}, nil
}

func containerCells(cs []corev1.Container) (names, images string) {
	n := make([]string, len(cs))
	im := make([]string, len(cs))
	for i, c := range cs {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

// Services.

var serviceColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Type", "string", 0, corev1.ServiceSpec{}.SwaggerDoc()["type"]),
	col("Cluster-IP", "string", 0, corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]),
	col("External-IP", "string", 0, corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]),
	col("Port(s)", "string", 0, corev1.ServiceSpec{}.SwaggerDoc()["ports"]),
	ageColumnDef,
	col("Selector", "string", 1, corev1.ServiceSpec{}.SwaggerDoc()["selector"]),
}

func serviceCells(svc *corev1.Service, now time.Time) ([]any, []metav1.TableRowCondition) {
	clusterIP := "<none>"
	if len(svc.Spec.ClusterIPs) > 0 {
		clusterIP = svc.Spec.ClusterIPs[0]
	}
	ports := make([]string, len(svc.Spec.Ports))
	for i, p := range svc.Spec.Ports {
		ports[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort > 0 {
			ports[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
	}
	return []any{svc.Name, string(svc.Spec.Type), clusterIP, serviceExternalIP(svc), orNone(strings.Join(ports, ",")),
		since(svc.CreationTimestamp, now), labels.FormatLabels(svc.Spec.Selector)}, nil
}

func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		return orNone(strings.Join(svc.Spec.ExternalIPs, ","))
	case corev1.ServiceTypeLoadBalancer:
		var lb []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			switch {
			case in.IP != "":
				lb = append(lb, in.IP)
			case in.Hostname != "":
				lb = append(lb, in.Hostname)
			}
		}
		slices.Sort(lb)
		lb = slices.Compact(lb)
		if all := append(lb, svc.Spec.ExternalIPs...); len(all) > 0 {
			return strings.Join(all, ",")
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// ConfigMaps, Secrets, Namespaces.

var configMapColumns = []metav1.TableColumnDefinition{
	nameColumnDef, col("Data", "string", 0, corev1.ConfigMap{}.SwaggerDoc()["data"]), ageColumnDef,
}

func configMapCells(cm *corev1.ConfigMap, now time.Time) ([]any, []metav1.TableRowCondition) {
	return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), since(cm.CreationTimestamp, now)}, nil
}

var secretColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Type", "string", 0, corev1.Secret{}.SwaggerDoc()["type"]),
	col("Data", "string", 0, corev1.Secret{}.SwaggerDoc()["data"]),
	ageColumnDef,
}

func secretCells(s *corev1.Secret, now time.Time) ([]any, []metav1.TableRowCondition) {
	return []any{s.Name, string(s.Type), int64(len(s.Data)), since(s.CreationTimestamp, now)}, nil
}

var namespaceColumns = []metav1.TableColumnDefinition{
	nameColumnDef, col("Status", "string", 0, "The status of the namespace"), ageColumnDef,
}

func namespaceCells(ns *corev1.Namespace, now time.Time) ([]any, []metav1.TableRowCondition) {
	return []any{ns.Name, string(ns.Status.Phase), since(ns.CreationTimestamp, now)}, nil
}

// Nodes.

var nodeColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Status", "string", 0, "The status of the node"),
	col("Roles", "string", 0, "The roles of the node"),
	ageColumnDef,
	col("Version", "string", 0, corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]),
	col("Internal-IP", "string", 1, corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
	col("External-IP", "string", 1, corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
	col("OS-Image", "string", 1, corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]),
	col("Kernel-Version", "string", 1, corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]),
	col("Container-Runtime", "string", 1, corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]),
}

func nodeCells(n *corev1.Node, now time.Time) ([]any, []metav1.TableRowCondition) {
	var status []string
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = append(status, "Ready")
			} else {
				status = append(status, "NotReady")
			}
			break
		}
	}
	if len(status) == 0 {
		status = append(status, "Unknown")
	}
	if n.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}
	var roles []string
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/") && len(k) > len("node-role.kubernetes.io/"):
			roles = append(roles, strings.TrimPrefix(k, "node-role.kubernetes.io/"))
		case k == "kubernetes.io/role" && v != "":
			roles = append(roles, v)
		}
	}
	slices.Sort(roles)
	roles = slices.Compact(roles)
	address := func(t corev1.NodeAddressType) string {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	}
	info := n.Status.NodeInfo
	kernel := info.KernelVersion
	if kernel == "" {
		kernel = "<unknown>"
	}
	if info.Architecture != "" {
		kernel += " (" + info.Architecture + ")"
	}
	unknown := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	return []any{n.Name, strings.Join(status, ","), orNone(strings.Join(roles, ",")), since(n.CreationTimestamp, now),
		info.KubeletVersion, address(corev1.NodeInternalIP), address(corev1.NodeExternalIP), unknown(info.OSImage),
		kernel, unknown(info.ContainerRuntimeVersion)}, nil
}

// Events (core/v1).

var eventColumns = []metav1.TableColumnDefinition{
	col("Last Seen", "string", 0, corev1.Event{}.SwaggerDoc()["lastTimestamp"]),
	col("Type", "string", 0, corev1.Event{}.SwaggerDoc()["type"]),
	col("Reason", "string", 0, corev1.Event{}.SwaggerDoc()["reason"]),
	col("Object", "string", 0, corev1.Event{}.SwaggerDoc()["involvedObject"]),
	col("Subobject", "string", 1, corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
	col("Source", "string", 1, corev1.Event{}.SwaggerDoc()["source"]),
	col("Message", "string", 0, corev1.Event{}.SwaggerDoc()["message"]),
	col("First Seen", "string", 1, corev1.Event{}.SwaggerDoc()["firstTimestamp"]),
	col("Count", "string", 1, corev1.Event{}.SwaggerDoc()["count"]),
	col("Name", "string", 1, metav1.ObjectMeta{}.SwaggerDoc()["name"]),
}

func eventCells(e *corev1.Event, now time.Time) ([]any, []metav1.TableRowCondition) {
	first := since(e.FirstTimestamp, now)
	if e.FirstTimestamp.IsZero() {
		first = microSince(e.EventTime, now)
	}
	last := since(e.LastTimestamp, now)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	if e.Series != nil {
		last = microSince(e.Series.LastObservedTime, now)
		count = e.Series.Count
	} else if count == 0 {
		count = 1 // singleton events of the events.k8s.io API have none
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
	return []any{last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath, source, strings.TrimSpace(e.Message),
		first, int64(count), e.Name}, nil
}

// StatefulSets and DaemonSets.

var statefulSetColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Ready", "string", 0, "Number of the pod with ready state"),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
}

func statefulSetCells(ss *appsv1.StatefulSet, now time.Time) ([]any, []metav1.TableRowCondition) {
	desired := int32(1)
	if ss.Spec.Replicas != nil {
		desired = *ss.Spec.Replicas
	}
	names, images := containerCells(ss.Spec.Template.Spec.Containers)
	return []any{ss.Name, fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, desired), since(ss.CreationTimestamp, now),
		names, images}, nil
}

var daemonSetColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Desired", "integer", 0, appsv1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"]),
	col("Current", "integer", 0, appsv1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"]),
	col("Ready", "integer", 0, appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]),
	col("Up-to-date", "integer", 0, appsv1.DaemonSetStatus{}.SwaggerDoc()["updatedNumberScheduled"]),
	col("Available", "integer", 0, appsv1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"]),
	col("Node Selector", "string", 0, corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
	col("Selector", "string", 1, appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]),
}

func daemonSetCells(ds *appsv1.DaemonSet, now time.Time) ([]any, []metav1.TableRowCondition) {
	st := ds.Status
	names, images := containerCells(ds.Spec.Template.Spec.Containers)
	return []any{ds.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
		int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
		since(ds.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(ds.Spec.Selector)}, nil
}

// Jobs and CronJobs.

var jobColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Status", "string", 0, "Status of the job."),
	col("Completions", "string", 0, batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
	col("Duration", "string", 0, "Time required to complete the job."),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
	col("Selector", "string", 1, batchv1.JobSpec{}.SwaggerDoc()["selector"]),
}

func jobCells(j *batchv1.Job, now time.Time) ([]any, []metav1.TableRowCondition) {
	var completions string
	switch {
	case j.Spec.Completions != nil:
		completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	case j.Spec.Parallelism != nil && *j.Spec.Parallelism > 1:
		completions = fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *j.Spec.Parallelism)
	default:
		completions = fmt.Sprintf("%d/1", j.Status.Succeeded)
	}
	var took string
	switch {
	case j.Status.StartTime == nil:
	case j.Status.CompletionTime == nil:
		took = duration.HumanDuration(now.Sub(j.Status.StartTime.Time))
	default:
		took = duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
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
	return []any{j.Name, status, completions, took, since(j.CreationTimestamp, now), names, images,
		metav1.FormatLabelSelector(j.Spec.Selector)}, nil
}

var cronJobColumns = []metav1.TableColumnDefinition{
	nameColumnDef,
	col("Schedule", "string", 0, batchv1.CronJobSpec{}.SwaggerDoc()["schedule"]),
	col("Timezone", "string", 0, batchv1.CronJobSpec{}.SwaggerDoc()["timeZone"]),
	col("Suspend", "boolean", 0, batchv1.CronJobSpec{}.SwaggerDoc()["suspend"]),
	col("Active", "integer", 0, batchv1.CronJobStatus{}.SwaggerDoc()["active"]),
	col("Last Schedule", "string", 0, batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
	col("Selector", "string", 1, batchv1.JobSpec{}.SwaggerDoc()["selector"]),
}

func cronJobCells(cj *batchv1.CronJob, now time.Time) ([]any, []metav1.TableRowCondition) {
	last := "<none>"
	if cj.Status.LastScheduleTime != nil {
		last = since(*cj.Status.LastScheduleTime, now)
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
	return []any{cj.Name, cj.Spec.Schedule, tz, suspend, int64(len(cj.Status.Active)), last, since(cj.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(tmpl.Selector)}, nil
}
