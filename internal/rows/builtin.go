package rows

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

	"kubegate/internal/cell"
	"kubegate/internal/informer"
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
// and only when a row is asked for; lists and watches in JSON never
// decode.

// printer builds the Printer of the typed object T.
func printer[T any](columns []Column, cells func(o *T) ([]Cell, []metav1.TableRowCondition)) *Printer {
	return &Printer{columns: columns, row: func(o *informer.Object) *Row {
		t := new(T)
		if err := json.Unmarshal(o.Raw, t); err != nil {
			// Stored objects come from the apiserver and decode; should
			// one not, its row still names it.
			r := &Row{Cells: make([]Cell, len(columns))}
			for i, c := range columns {
				if c.Name == "Name" {
					r.Cells[i] = text(o.Name)
				}
			}
			return r
		}
		c, cond := cells(t)
		return &Row{Cells: c, Conditions: cond}
	}}
}

// builtin are the resources with their own columns, by exact group,
// version and resource.
var builtin = map[schema.GroupVersionResource]*Printer{
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

// Builtin lists the resources with built-in printers.
func Builtin() []schema.GroupVersionResource {
	gvrs := make([]schema.GroupVersionResource, 0, len(builtin))
	for gvr := range builtin {
		gvrs = append(gvrs, gvr)
	}
	slices.SortFunc(gvrs, func(a, b schema.GroupVersionResource) int { return strings.Compare(a.String(), b.String()) })
	return gvrs
}

func col(name, typ string, priority int32, desc string) Column {
	c := Column{TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: typ, Priority: priority, Description: desc}}
	if name == "Name" {
		c.Format = "name"
	}
	return c
}

// relativeCol is a column whose cells may be relative, and whose typed
// values are the times they count from (Column.Age).
func relativeCol(name, typ string, priority int32, desc string) Column {
	c := col(name, typ, priority, desc)
	c.Relative, c.Age = true, true
	return c
}

var (
	nameColumnDef = col("Name", "string", 0, metav1.ObjectMeta{}.SwaggerDoc()["name"])
	ageColumnDef  = relativeCol("Age", "string", 0, metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"])
)

// Pods.

var podColumns = []Column{
	nameColumnDef,
	col("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
	col("Status", "string", 0, "The aggregate status of the containers in this pod."),
	// Restarts sorts by its typed value, the count.
	{TableColumnDefinition: col("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.").TableColumnDefinition, Relative: true},
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

var deploymentColumns = []Column{
	nameColumnDef,
	col("Ready", "string", 0, "Number of the pod with ready state"),
	col("Up-to-date", "string", 0, appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]),
	col("Available", "string", 0, appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
	col("Selector", "string", 1, appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]),
}

func deploymentCells(d *appsv1.Deployment) ([]Cell, []metav1.TableRowCondition) {
	desired := int32(1) // the apiserver's default, for objects stored without it
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	sel := "<invalid>"
	if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		sel = s.String()
	}
	names, images := containerCells(d.Spec.Template.Spec.Containers)
	return []Cell{text(d.Name), count(fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired), int64(d.Status.ReadyReplicas)),
		integer(int64(d.Status.UpdatedReplicas)), integer(int64(d.Status.AvailableReplicas)), since(d.CreationTimestamp.Time),
		text(names), text(images), text(sel)}, nil
}

var replicaSetColumns = []Column{
	nameColumnDef,
	col("Desired", "integer", 0, appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]),
	col("Current", "integer", 0, appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]),
	col("Ready", "integer", 0, appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
	col("Selector", "string", 1, appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]),
}

func replicaSetCells(rs *appsv1.ReplicaSet) ([]Cell, []metav1.TableRowCondition) {
	desired := int32(1)
	if rs.Spec.Replicas != nil {
		desired = *rs.Spec.Replicas
	}
	names, images := containerCells(rs.Spec.Template.Spec.Containers)
	return []Cell{text(rs.Name), integer(int64(desired)), integer(int64(rs.Status.Replicas)), integer(int64(rs.Status.ReadyReplicas)),
		since(rs.CreationTimestamp.Time), text(names), text(images), text(metav1.FormatLabelSelector(rs.Spec.Selector))}, nil
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

var serviceColumns = []Column{
	nameColumnDef,
	col("Type", "string", 0, corev1.ServiceSpec{}.SwaggerDoc()["type"]),
	col("Cluster-IP", "string", 0, corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]),
	col("External-IP", "string", 0, corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]),
	col("Port(s)", "string", 0, corev1.ServiceSpec{}.SwaggerDoc()["ports"]),
	ageColumnDef,
	col("Selector", "string", 1, corev1.ServiceSpec{}.SwaggerDoc()["selector"]),
}

func serviceCells(svc *corev1.Service) ([]Cell, []metav1.TableRowCondition) {
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
	return []Cell{text(svc.Name), text(string(svc.Spec.Type)), text(clusterIP), text(serviceExternalIP(svc)),
		text(orNone(strings.Join(ports, ","))), since(svc.CreationTimestamp.Time), text(labels.FormatLabels(svc.Spec.Selector))}, nil
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

var configMapColumns = []Column{
	nameColumnDef, col("Data", "string", 0, corev1.ConfigMap{}.SwaggerDoc()["data"]), ageColumnDef,
}

func configMapCells(cm *corev1.ConfigMap) ([]Cell, []metav1.TableRowCondition) {
	return []Cell{text(cm.Name), integer(int64(len(cm.Data) + len(cm.BinaryData))), since(cm.CreationTimestamp.Time)}, nil
}

var secretColumns = []Column{
	nameColumnDef,
	col("Type", "string", 0, corev1.Secret{}.SwaggerDoc()["type"]),
	col("Data", "string", 0, corev1.Secret{}.SwaggerDoc()["data"]),
	ageColumnDef,
}

func secretCells(s *corev1.Secret) ([]Cell, []metav1.TableRowCondition) {
	return []Cell{text(s.Name), text(string(s.Type)), integer(int64(len(s.Data))), since(s.CreationTimestamp.Time)}, nil
}

var namespaceColumns = []Column{
	nameColumnDef, col("Status", "string", 0, "The status of the namespace"), ageColumnDef,
}

func namespaceCells(ns *corev1.Namespace) ([]Cell, []metav1.TableRowCondition) {
	return []Cell{text(ns.Name), text(string(ns.Status.Phase)), since(ns.CreationTimestamp.Time)}, nil
}

// Nodes.

var nodeColumns = []Column{
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

func nodeCells(n *corev1.Node) ([]Cell, []metav1.TableRowCondition) {
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
	return []Cell{text(n.Name), text(strings.Join(status, ",")), text(orNone(strings.Join(roles, ","))), since(n.CreationTimestamp.Time),
		text(info.KubeletVersion), text(address(corev1.NodeInternalIP)), text(address(corev1.NodeExternalIP)), text(unknown(info.OSImage)),
		text(kernel), text(unknown(info.ContainerRuntimeVersion))}, nil
}

// Events (core/v1).

var eventColumns = []Column{
	relativeCol("Last Seen", "string", 0, corev1.Event{}.SwaggerDoc()["lastTimestamp"]),
	col("Type", "string", 0, corev1.Event{}.SwaggerDoc()["type"]),
	col("Reason", "string", 0, corev1.Event{}.SwaggerDoc()["reason"]),
	col("Object", "string", 0, corev1.Event{}.SwaggerDoc()["involvedObject"]),
	col("Subobject", "string", 1, corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
	col("Source", "string", 1, corev1.Event{}.SwaggerDoc()["source"]),
	col("Message", "string", 0, corev1.Event{}.SwaggerDoc()["message"]),
	relativeCol("First Seen", "string", 1, corev1.Event{}.SwaggerDoc()["firstTimestamp"]),
	col("Count", "string", 1, corev1.Event{}.SwaggerDoc()["count"]),
	col("Name", "string", 1, metav1.ObjectMeta{}.SwaggerDoc()["name"]),
}

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

// StatefulSets and DaemonSets.

var statefulSetColumns = []Column{
	nameColumnDef,
	col("Ready", "string", 0, "Number of the pod with ready state"),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
}

func statefulSetCells(ss *appsv1.StatefulSet) ([]Cell, []metav1.TableRowCondition) {
	desired := int32(1)
	if ss.Spec.Replicas != nil {
		desired = *ss.Spec.Replicas
	}
	names, images := containerCells(ss.Spec.Template.Spec.Containers)
	return []Cell{text(ss.Name), count(fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, desired), int64(ss.Status.ReadyReplicas)),
		since(ss.CreationTimestamp.Time), text(names), text(images)}, nil
}

var daemonSetColumns = []Column{
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

func daemonSetCells(ds *appsv1.DaemonSet) ([]Cell, []metav1.TableRowCondition) {
	st := ds.Status
	names, images := containerCells(ds.Spec.Template.Spec.Containers)
	return []Cell{text(ds.Name), integer(int64(st.DesiredNumberScheduled)), integer(int64(st.CurrentNumberScheduled)),
		integer(int64(st.NumberReady)), integer(int64(st.UpdatedNumberScheduled)), integer(int64(st.NumberAvailable)),
		text(labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector)), since(ds.CreationTimestamp.Time), text(names), text(images),
		text(metav1.FormatLabelSelector(ds.Spec.Selector))}, nil
}

// Jobs and CronJobs.

var jobColumns = []Column{
	nameColumnDef,
	col("Status", "string", 0, "Status of the job."),
	col("Completions", "string", 0, batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
	relativeCol("Duration", "string", 0, "Time required to complete the job."),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
	col("Selector", "string", 1, batchv1.JobSpec{}.SwaggerDoc()["selector"]),
}

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
		took = Cell{Value: ""}
	case j.Status.CompletionTime == nil:
		took = Cell{Since: j.Status.StartTime.Time, relative: true, Typed: cell.Time(j.Status.StartTime.Time)}
	default:
		d := j.Status.CompletionTime.Sub(j.Status.StartTime.Time)
		took = Cell{Value: duration.HumanDuration(d), Typed: cell.Int(int64(d / time.Second))}
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

var cronJobColumns = []Column{
	nameColumnDef,
	col("Schedule", "string", 0, batchv1.CronJobSpec{}.SwaggerDoc()["schedule"]),
	col("Timezone", "string", 0, batchv1.CronJobSpec{}.SwaggerDoc()["timeZone"]),
	col("Suspend", "boolean", 0, batchv1.CronJobSpec{}.SwaggerDoc()["suspend"]),
	col("Active", "integer", 0, batchv1.CronJobStatus{}.SwaggerDoc()["active"]),
	relativeCol("Last Schedule", "string", 0, batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]),
	ageColumnDef,
	col("Containers", "string", 1, "Names of each container in the template."),
	col("Images", "string", 1, "Images referenced by each container in the template."),
	col("Selector", "string", 1, batchv1.JobSpec{}.SwaggerDoc()["selector"]),
}

func cronJobCells(cj *batchv1.CronJob) ([]Cell, []metav1.TableRowCondition) {
	last := Cell{Value: "<none>"} // never scheduled: missing when sorted
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
