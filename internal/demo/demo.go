package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
)

// Options configures Run. The zero value is usable.
type Options struct {
	// Namespaces is how many namespaces to fill. Default: 3.
	Namespaces int
	// NamespacePrefix names them <prefix>1..<prefix>N. Default: "demo-".
	NamespacePrefix string
	// PodsPerNamespace is how many pods each namespace keeps. Default: 10.
	PodsPerNamespace int
	// Rate is how many changes per second Run makes once the objects
	// exist. Default: 5.
	Rate float64
	// MaxChanges makes Run return after this many changes. Default: 0,
	// which means until ctx ends.
	MaxChanges int
	// Log receives progress and, at debug level, every change. Default:
	// no logging.
	Log *zap.Logger

	// Test hooks.
	clock    clock.Clock  // default clock.RealClock{}
	seed     uint64       // default: random
	onChange func(change) // called after each successful change
}

func (o Options) withDefaults() Options {
	if o.Namespaces <= 0 {
		o.Namespaces = 3
	}
	if o.NamespacePrefix == "" {
		o.NamespacePrefix = "demo-"
	}
	if o.PodsPerNamespace <= 0 {
		o.PodsPerNamespace = 10
	}
	if o.Rate <= 0 {
		o.Rate = 5
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	if o.seed == 0 {
		o.seed = rand.Uint64()
	}
	return o
}

// maxConsecutiveFailures ends Run when the cluster keeps refusing changes
// (permissions, a gone apiserver) instead of logging forever.
const maxConsecutiveFailures = 50

// change describes one change Run made.
type change struct {
	kind      string // pod, pod-recreate, configmap, widget, deployment
	namespace string
	name      string
	what      string
}

// slot is one pod position in a namespace; pod is its current pod's name,
// which changes when the pod is recreated.
type slot struct {
	ns      string
	nsIndex int
	index   int
	app     app
	pod     string
}

type workload struct {
	ns  string
	app app
}

type widgetRef struct {
	ns, name string
}

// world is Run's state. It is used by Run's goroutine only.
type world struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
	opts   Options
	log    *zap.Logger
	rng    *rand.Rand

	slots     []*slot
	workloads []workload // one Deployment and ConfigMap each
	widgets   []widgetRef
	revision  int // last configmap revision written
}

// Run creates the demo objects (reusing any that exist, so it can be
// restarted) and then changes them at opts.Rate until ctx ends or
// opts.MaxChanges is reached. It returns nil in both cases. It runs in the
// caller's goroutine and starts none of its own.
//
// A failed change is logged and skipped, so Run rides out apiserver
// restarts; it returns an error when setup fails or when many changes in a
// row fail.
func Run(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, opts Options) error {
	opts = opts.withDefaults()
	w := &world{
		client: client,
		dyn:    dyn,
		opts:   opts,
		log:    opts.Log,
		rng:    rand.New(rand.NewPCG(opts.seed, opts.seed^0x9e3779b97f4a7c15)),
	}
	if err := w.setup(ctx); err != nil {
		return fmt.Errorf("demo setup: %w", err)
	}
	w.log.Info("demo objects ready; changing them",
		zap.Int("namespaces", opts.Namespaces), zap.Int("pods", len(w.slots)),
		zap.Float64("rate", opts.Rate), zap.Int("maxChanges", opts.MaxChanges))
	return w.loop(ctx)
}

func (w *world) setup(ctx context.Context) error {
	if err := ensureWidgetCRD(ctx, w.dyn); err != nil {
		return err
	}
	for i := 1; i <= w.opts.Namespaces; i++ {
		ns := w.opts.NamespacePrefix + strconv.Itoa(i)
		if err := w.setupNamespace(ctx, ns, i); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	return nil
}

func (w *world) setupNamespace(ctx context.Context, ns string, nsIndex int) error {
	if err := ignoreExists(w.client.CoreV1().Namespaces().Create(ctx, newNamespace(ns), metav1.CreateOptions{})); err != nil {
		return err
	}

	replicas := map[string]int32{}
	for i := range w.opts.PodsPerNamespace {
		replicas[apps[i%len(apps)].name]++
	}
	for _, a := range apps {
		if replicas[a.name] == 0 {
			continue
		}
		if err := ignoreExists(w.client.CoreV1().ConfigMaps(ns).Create(ctx, newConfigMap(ns, a), metav1.CreateOptions{})); err != nil {
			return err
		}
		if err := ignoreExists(w.client.AppsV1().Deployments(ns).Create(ctx, newDeployment(ns, a, replicas[a.name]), metav1.CreateOptions{})); err != nil {
			return err
		}
		w.workloads = append(w.workloads, workload{ns: ns, app: a})
	}

	// Adopt the pods of an earlier run, one per slot; create the rest.
	existing, err := w.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{partOfLabel: partOfValue}.String(),
	})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	bySlot := map[string]string{}
	for _, p := range existing.Items {
		if p.DeletionTimestamp == nil {
			bySlot[p.Labels[slotLabel]] = p.Name
		}
	}
	for i := range w.opts.PodsPerNamespace {
		s := &slot{ns: ns, nsIndex: nsIndex, index: i, app: apps[i%len(apps)], pod: bySlot[strconv.Itoa(i)]}
		w.slots = append(w.slots, s)
		if s.pod != "" {
			continue
		}
		// Most pods start out running; the rest are left for the loop
		// to bring up, as a kubelet would a little later.
		if err := w.createPod(ctx, s, w.rng.Float64() < 0.75); err != nil {
			return err
		}
	}
	for _, wl := range w.workloads {
		if wl.ns == ns {
			if err := w.syncDeploymentStatus(ctx, wl); err != nil {
				return err
			}
		}
	}

	for i, name := range widgetNames {
		obj := newWidget(ns, name, nsIndex*len(widgetNames)+i)
		created, err := w.createWidget(ctx, obj)
		if apierrors.IsAlreadyExists(err) {
			w.widgets = append(w.widgets, widgetRef{ns: ns, name: name})
			continue
		}
		if err != nil {
			return fmt.Errorf("create widget %s: %w", name, err)
		}
		setWidgetStatus(created, "Ready", "all parts in stock")
		if _, err := w.dyn.Resource(WidgetGVR).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("widget %s status: %w", name, err)
		}
		w.widgets = append(w.widgets, widgetRef{ns: ns, name: name})
	}
	w.log.Info("demo namespace ready", zap.String("namespace", ns))
	return nil
}

// createWidget retries briefly on NotFound: right after the CRD becomes
// established, the apiserver may not serve the new resource yet.
func (w *world) createWidget(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var created *unstructured.Unstructured
	backoff := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 1.5, Steps: 10}
	err := retry.OnError(backoff, apierrors.IsNotFound, func() error {
		var err error
		created, err = w.dyn.Resource(WidgetGVR).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
	return created, err
}

// createPod creates a new pod for slot s and reports it pending or running.
func (w *world) createPod(ctx context.Context, s *slot, running bool) error {
	pod, err := w.client.CoreV1().Pods(s.ns).Create(ctx, newPod(s.ns, s.app, s.index, w.rng), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod: %w", err)
	}
	s.pod = pod.Name
	now := w.opts.clock.Now()
	setPending(pod, now)
	if running {
		setRunning(pod, s.nsIndex, now)
	}
	if _, err := w.client.CoreV1().Pods(s.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pod %s status: %w", pod.Name, err)
	}
	return nil
}

func (w *world) loop(ctx context.Context) error {
	p := newPacer(w.opts.Rate, w.opts.clock)
	done, failures := 0, 0
	for w.opts.MaxChanges == 0 || done < w.opts.MaxChanges {
		if err := p.wait(ctx); err != nil {
			return nil // ctx ended
		}
		c, err := w.change(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			failures++
			w.log.Warn("demo change failed", zap.String("kind", c.kind), zap.String("namespace", c.namespace),
				zap.String("name", c.name), zap.Error(err))
			if failures >= maxConsecutiveFailures {
				return fmt.Errorf("demo: %d changes in a row failed, last: %w", failures, err)
			}
			continue
		}
		failures = 0
		done++
		w.log.Debug("demo change", zap.String("kind", c.kind), zap.String("namespace", c.namespace),
			zap.String("name", c.name), zap.String("what", c.what))
		if w.opts.onChange != nil {
			w.opts.onChange(c)
		}
	}
	w.log.Info("demo reached its change limit", zap.Int("changes", done))
	return nil
}

// change makes one random change, weighted towards pods as a real
// cluster's event stream is.
func (w *world) change(ctx context.Context) (change, error) {
	switch n := w.rng.IntN(100); {
	case n < 40:
		return w.changePod(ctx, w.slots[w.rng.IntN(len(w.slots))])
	case n < 50:
		return w.recreatePod(ctx, w.slots[w.rng.IntN(len(w.slots))])
	case n < 70:
		return w.changeConfigMap(ctx, w.workloads[w.rng.IntN(len(w.workloads))])
	case n < 90:
		return w.changeWidget(ctx, w.widgets[w.rng.IntN(len(w.widgets))])
	default:
		wl := w.workloads[w.rng.IntN(len(w.workloads))]
		return change{kind: "deployment", namespace: wl.ns, name: wl.app.name, what: "status"}, w.syncDeploymentStatus(ctx, wl)
	}
}

// changePod plays the kubelet or a user: a pending pod starts running; a
// running one has a container restart or its track label flipped.
func (w *world) changePod(ctx context.Context, s *slot) (change, error) {
	c := change{kind: "pod", namespace: s.ns, name: s.pod}
	pods := w.client.CoreV1().Pods(s.ns)
	restart := w.rng.IntN(3) == 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := pods.Get(ctx, s.pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Someone deleted it: the ReplicaSet we pretend to be
			// replaces it.
			c.what = "replaced missing pod"
			return w.createPod(ctx, s, false)
		}
		if err != nil {
			return err
		}
		now := w.opts.clock.Now()
		switch {
		case pod.Status.Phase != corev1.PodRunning:
			c.what = "started"
			setRunning(pod, s.nsIndex, now)
			_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		case restart:
			c.what = "container restarted"
			restartContainer(pod, now)
			_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		default:
			track := tracks[0]
			if pod.Labels[trackLabel] == track {
				track = tracks[1]
			}
			c.what = "track=" + track
			pod.Labels[trackLabel] = track
			_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
		}
		return err
	})
	c.name = s.pod
	return c, err
}

// recreatePod deletes the slot's pod and creates its replacement, which
// starts out pending.
func (w *world) recreatePod(ctx context.Context, s *slot) (change, error) {
	c := change{kind: "pod-recreate", namespace: s.ns, name: s.pod}
	// The pod is bound to a node, so without a zero grace period it
	// would wait for a kubelet to confirm.
	err := w.client.CoreV1().Pods(s.ns).Delete(ctx, s.pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	if err != nil && !apierrors.IsNotFound(err) {
		return c, fmt.Errorf("delete pod: %w", err)
	}
	if err := w.createPod(ctx, s, false); err != nil {
		return c, err
	}
	c.what = "replaced by " + s.pod
	return c, nil
}

func (w *world) changeConfigMap(ctx context.Context, wl workload) (change, error) {
	c := change{kind: "configmap", namespace: wl.ns, name: configMapName(wl.app)}
	cms := w.client.CoreV1().ConfigMaps(wl.ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		rev, _ := strconv.Atoi(cm.Data["revision"])
		level := logLevels[w.rng.IntN(len(logLevels))]
		cm.Data["revision"] = strconv.Itoa(rev + 1)
		cm.Data["LOG_LEVEL"] = level
		c.what = fmt.Sprintf("revision=%d LOG_LEVEL=%s", rev+1, level)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	return c, err
}

// changeWidget plays a user editing the spec and the widget's controller
// catching up in the status.
func (w *world) changeWidget(ctx context.Context, ref widgetRef) (change, error) {
	c := change{kind: "widget", namespace: ref.ns, name: ref.name}
	widgets := w.dyn.Resource(WidgetGVR).Namespace(ref.ns)
	var updated *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := widgets.Get(ctx, ref.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		color := widgetColors[w.rng.IntN(len(widgetColors))]
		size := int64(w.rng.IntN(10) + 1)
		unstructured.SetNestedField(obj.Object, color, "spec", "color")
		unstructured.SetNestedField(obj.Object, size, "spec", "size")
		c.what = fmt.Sprintf("color=%s size=%d", color, size)
		updated, err = widgets.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return c, err
	}
	setWidgetStatus(updated, "Ready", "rebuilt to spec")
	if _, err := widgets.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return c, fmt.Errorf("status: %w", err)
	}
	return c, nil
}

// syncDeploymentStatus plays the deployment controller: it reports how
// many of the app's pods run.
func (w *world) syncDeploymentStatus(ctx context.Context, wl workload) error {
	pods, err := w.client.CoreV1().Pods(wl.ns).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{"app": wl.app.name, partOfLabel: partOfValue}.String(),
	})
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", wl.app.name, err)
	}
	var total, ready int32
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		total++
		if p.Status.Phase == corev1.PodRunning {
			ready++
		}
	}
	deployments := w.client.AppsV1().Deployments(wl.ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(ctx, wl.app.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewTime(w.opts.clock.Now())
		available := corev1.ConditionFalse
		if d.Spec.Replicas != nil && ready >= *d.Spec.Replicas {
			available = corev1.ConditionTrue
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration:  d.Generation,
			Replicas:            total,
			UpdatedReplicas:     total,
			ReadyReplicas:       ready,
			AvailableReplicas:   ready,
			UnavailableReplicas: max(0, total-ready),
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: available, LastUpdateTime: now, LastTransitionTime: now, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now, Reason: "NewReplicaSetAvailable"},
			},
		}
		_, err = deployments.UpdateStatus(ctx, d, metav1.UpdateOptions{})
		return err
	})
}

func ignoreExists[T any](_ T, err error) error {
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
