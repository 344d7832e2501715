package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kubegate/internal/config"
	"kubegate/internal/gateway"
	"kubegate/internal/gateway/gatewaytest"
	"kubegate/internal/testenv"
)

// passGateway is a gateway serving HTTPS with the default configuration
// (authn kubernetes, authz rbac, pass-through on), and a kubeconfig with
// a context per static user through it ("gw-<user>") and straight to
// kube-apiserver ("api-<user>"): kubectl sends a kubeconfig's token only
// to an https server.
type passGateway struct {
	gw         *gateway.Gateway
	url        string
	ca         []byte
	kubeconfig string
	cacheDir   string
	kubectlBin string
}

func startPassGateway(t *testing.T, mutate func(*config.Config), opts gateway.Options) *passGateway {
	t.Helper()
	env := testenv.Get(t)
	pair := newServingPair(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	pair.write(t, certFile, keyFile)
	cfg := gatewaytest.Config()
	cfg.TLS = config.TLS{CertFile: certFile, PrivateKeyFile: keyFile}
	cfg.ShutdownTimeout = config.Duration(5 * time.Second)
	if mutate != nil {
		mutate(&cfg)
	}
	g := &passGateway{ca: pair.cert, cacheDir: filepath.Join(dir, "kubectl-cache"), kubectlBin: env.Kubectl(t)}
	g.gw = gatewaytest.Start(t, cfg, opts)
	g.url = g.gw.URL()

	kc := clientcmdapi.NewConfig()
	kc.Clusters["gw"] = &clientcmdapi.Cluster{Server: g.url, CertificateAuthorityData: pair.cert}
	kc.Clusters["api"] = &clientcmdapi.Cluster{Server: env.CP.URL(), CertificateAuthorityData: env.CP.CAData()}
	for _, u := range env.CP.Users() {
		kc.AuthInfos[u.Name] = &clientcmdapi.AuthInfo{Token: u.Token}
		kc.Contexts["gw-"+u.Name] = &clientcmdapi.Context{Cluster: "gw", AuthInfo: u.Name}
		kc.Contexts["api-"+u.Name] = &clientcmdapi.Context{Cluster: "api", AuthInfo: u.Name}
	}
	g.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, g.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return g
}

// ran is what one kubectl command printed and how it exited.
type ran struct {
	stdout, stderr string
	code           int
}

// kubectl runs kubectl in context kctx (gw-<user> or api-<user>) with
// stdin.
func (g *passGateway) kubectl(t *testing.T, kctx, stdin string, args ...string) ran {
	t.Helper()
	return g.kubectlEnv(t, nil, kctx, stdin, args...)
}

// kubectlEnv is kubectl with more environment variables.
func (g *passGateway) kubectlEnv(t *testing.T, env []string, kctx, stdin string, args ...string) ran {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.kubectlBin, append([]string{"--kubeconfig", g.kubeconfig, "--context", kctx, "--cache-dir", g.cacheDir}, args...)...)
	cmd.Env = append(append(os.Environ(), "HOME="+filepath.Dir(g.cacheDir)), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, strings.NewReader(stdin)
	err := cmd.Run()
	var ee *exec.ExitError
	r := ran{stdout: out.String(), stderr: errb.String()}
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kubectl %v: %v", args, err)
	}
	return r
}

// both runs the command as user through the gateway and straight to
// kube-apiserver, and fails the test unless they print the same and
// exit alike. It returns the gateway's run.
func (g *passGateway) both(t *testing.T, user, stdin string, args ...string) ran {
	t.Helper()
	return g.bothEnv(t, nil, user, stdin, args...)
}

// bothEnv is both with more environment variables.
func (g *passGateway) bothEnv(t *testing.T, env []string, user, stdin string, args ...string) ran {
	t.Helper()
	viaGW, direct := g.pair(t, env, user, stdin, args...)
	if answerTime(viaGW) != answerTime(direct) {
		t.Errorf("kubectl %s as %s:\nthrough the gateway: exit %d\n%s%s\nfrom kube-apiserver: exit %d\n%s%s",
			strings.Join(args, " "), user, viaGW.code, viaGW.stdout, viaGW.stderr, direct.code, direct.stdout, direct.stderr)
	}
	return viaGW
}

// reviewStamp is the creationTimestamp kube-apiserver puts on a
// SelfSubjectReview: the second it answered, which two runs a moment
// apart need not share.
var reviewStamp = regexp.MustCompile(`("creationTimestamp": )"[0-9TZ:-]+"`)

// answerTime returns r with a SelfSubjectReview's creationTimestamp
// (kubectl auth whoami -o json) masked. Other objects' timestamps are
// stored ones, equal whichever way they are read, and stay.
func answerTime(r ran) ran {
	if strings.Contains(r.stdout, `"kind": "SelfSubjectReview"`) {
		r.stdout = reviewStamp.ReplaceAllString(r.stdout, `$1"(answer time)"`)
	}
	return r
}

// pair runs the command as user through the gateway, then straight to
// kube-apiserver, and returns both runs.
func (g *passGateway) pair(t *testing.T, env []string, user, stdin string, args ...string) (viaGW, direct ran) {
	t.Helper()
	return g.kubectlEnv(t, env, "gw-"+user, stdin, args...), g.kubectlEnv(t, env, "api-"+user, stdin, args...)
}

// grantEdit gives user, in ns, what the edit ClusterRole gives on the
// resources the tests use (edit itself is empty here: its rules are
// aggregated by kube-controller-manager, which does not run), and waits
// until kube-apiserver's authorizer sees it.
func grantEdit(t *testing.T, ns, user string) {
	t.Helper()
	all := []string{"*"}
	grant(t, ns, user, user+"-edit", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "pods", "pods/log", "pods/exec", "pods/attach", "pods/portforward"}, Verbs: all},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: all},
	}, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "configmaps"})
}

// grant binds user to a role named name with rules: a Role in ns, or,
// with ns "", a ClusterRole, deleted when the test ends. It waits until
// kube-apiserver's authorizer lets user do what allowed says.
func grant(t *testing.T, ns, user, name string, rules []rbacv1.PolicyRule, allowed authorizationv1.ResourceAttributes) {
	t.Helper()
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	subjects := []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}
	var err error
	if ns != "" {
		_, err = env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		if err == nil {
			_, err = env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			}, metav1.CreateOptions{})
		}
	} else {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = env.Client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
			_ = env.Client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
		})
		_, err = env.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		if err == nil {
			_, err = env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			}, metav1.CreateOptions{})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sar, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &allowed,
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, err
	})
	if err != nil {
		t.Fatalf("%s not allowed to %s %s in %q after the binding: %v", user, allowed.Verb, allowed.Resource, allowed.Namespace, err)
	}
}
