package abuse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kubegate/internal/config"
	"kubegate/internal/controlplane"
	kgateway "kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
	"kubegate/internal/ws"
)

// Users of the test apiserver (static tokens). The gateway knows them only
// through TokenReview, and what they may read only through
// SubjectAccessReview, as in production.
const (
	abuser   = "mallory" // the misbehaving client identity
	bystand  = "alice"   // a well-behaved client on the same gateway
	newcomer = "bob"     // a second identity connecting during an abuse
	readers  = "kubegate-abuse-readers"

	// Identities of the isolation tests (isolation_test.go).
	accomplice = "eve"    // a second misbehaving identity, a reader too
	narrowed   = "nina"   // may read ConfigMaps in one namespace only
	scraper    = "olivia" // may get /metrics, and read nothing
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Users: []controlplane.User{
		{Name: abuser, Groups: []string{readers}},
		{Name: bystand, Groups: []string{readers}},
		{Name: newcomer, Groups: []string{readers}},
		{Name: accomplice, Groups: []string{readers}},
		{Name: narrowed},
		{Name: scraper},
	}})
}

var rbacOnce sync.Once

// grantReaders lets the test users read ConfigMaps everywhere, through a
// ClusterRole bound to their group.
func grantReaders(t *testing.T) {
	t.Helper()
	rbacOnce.Do(func() {
		ctx := context.Background()
		rbac := testenv.Get(t).Client.RbacV1()
		_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: readers},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
			}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: readers},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readers},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: readers}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	})
}

func token(t testing.TB, user string) string {
	t.Helper()
	tok := testenv.Get(t).CP.UserConfig(user).BearerToken
	if tok == "" {
		t.Fatalf("no token for %s", user)
	}
	return tok
}

// gateway is the gateway as cmd/gateway builds it (gateway.New) with the
// default configuration (config.Default): TokenReview,
// SubjectAccessReview, per-user rate limits, the WebSocket limits, the
// HTTP server, against the test apiserver. Only the settings a test
// names differ.
type gateway struct {
	addr   string // host:port
	reg    *prometheus.Registry
	ws     *ws.Server
	tokens map[string]string // by user
}

// gatewayOptions changes startGateway's configuration.
type gatewayOptions struct {
	config func(*config.Config)
	// logger, when set, replaces the test logger at warn level.
	logger *zap.Logger
}

func startGateway(t *testing.T, o gatewayOptions) *gateway {
	t.Helper()
	grantReaders(t)
	cfg := gatewaytest.Config()
	if o.config != nil {
		o.config(&cfg)
	}
	// Warnings and errors only: a debug line per refused socket would cost
	// more than the abuse itself under -race.
	log := o.logger
	if log == nil {
		log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	g := gatewaytest.Start(t, cfg, kgateway.Options{Logger: log})
	tokens := map[string]string{}
	for _, u := range []string{abuser, bystand, newcomer, accomplice, narrowed, scraper} {
		tokens[u] = token(t, u)
	}
	return &gateway{addr: g.Addr().String(), reg: g.Registry(), ws: g.WebSocket(), tokens: tokens}
}

// metric sums the samples of a counter or gauge whose labels include the
// given name=value pairs.
func (g *gateway) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return testenv.Metric(t, g.reg, name, labels...)
}

// dial opens a WebSocket as user. A refused handshake returns the
// response (its body holds the metav1.Status).
func (g *gateway) dial(ctx context.Context, user string) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+g.addr+"/ws", &websocket.DialOptions{
		Subprotocols: []string{ws.Subprotocol},
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + g.tokens[user]}},
	})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(-1)
	return c, resp, nil
}

// frame is any server frame, decoded loosely for assertions.
type frame struct {
	Type    string            `json:"type"`
	ID      string            `json:"id"`
	RV      string            `json:"rv"`
	Request string            `json:"request"`
	Status  *metav1.Status    `json:"status"`
	Object  *corev1.ConfigMap `json:"object"`
	Events  []frame           `json:"events"`
}

func (f frame) String() string {
	switch {
	case f.Status != nil:
		return fmt.Sprintf("%s %s %d %s", f.Type, f.ID, f.Status.Code, f.Status.Message)
	case f.Object != nil:
		return fmt.Sprintf("%s %s %s@%s", f.Type, f.ID, f.Object.Name, f.RV)
	}
	return fmt.Sprintf("%s %s %s", f.Type, f.ID, f.Request)
}

// client reads frames one at a time, unpacking batches.
type client struct {
	c       *websocket.Conn
	pending []frame
}

func (c *client) send(ctx context.Context, v any) error {
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.c.Write(ctx, websocket.MessageText, b)
}

// next returns the next frame; the timeout is a failure bound.
func (c *client) next(ctx context.Context) (frame, error) {
	for len(c.pending) == 0 {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		typ, data, err := c.c.Read(ctx)
		cancel()
		if err != nil {
			return frame{}, err
		}
		if typ != websocket.MessageText {
			return frame{}, errors.New("binary message from the server")
		}
		if !utf8.Valid(data) {
			return frame{}, fmt.Errorf("server sent a text message that is not UTF-8: %.200q", data)
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			return frame{}, fmt.Errorf("server sent invalid JSON %.200q: %w", data, err)
		}
		if f.Type == "batch" {
			c.pending = append(c.pending, f.Events...)
		} else {
			c.pending = append(c.pending, f)
		}
	}
	f := c.pending[0]
	c.pending = c.pending[1:]
	return f, nil
}

func (c *client) expect(t *testing.T, typ, id string) frame {
	t.Helper()
	f, err := c.next(context.Background())
	if err != nil {
		t.Fatalf("waiting for %s %s: %v", typ, id, err)
	}
	if f.Type != typ || f.ID != id {
		t.Fatalf("got %v, want %s for %q", f, typ, id)
	}
	return f
}

func subscribe(id, namespace string) map[string]any {
	return map[string]any{"type": "subscribe", "id": id, "resource": "configmaps", "namespace": namespace}
}

// eventually polls cond until it holds; 60s is a failure bound.
func createCM(t *testing.T, ns, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := testenv.Get(t).Client.CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func isStatus(st *metav1.Status, code int32, reason metav1.StatusReason, msg string) bool {
	return st != nil && st.Kind == "Status" && st.Status == metav1.StatusFailure &&
		st.Code == code && st.Reason == reason && strings.Contains(st.Message, msg)
}
