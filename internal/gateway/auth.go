package gateway

import (
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kubegate/internal/auth"
	"kubegate/internal/config"
	"kubegate/internal/informer"
	"kubegate/internal/namespaces"
)

// authParts are the authentication and authorization pieces the servers
// share.
type authParts struct {
	authenticator auth.Authenticator
	authorizer    auth.Authorizer
	login         *auth.Login // nil for --authn=none
	limiter       *auth.RateLimiter
	proxies       *auth.TrustedProxies
}

// newAuth builds what --authn and --authz ask for. Reviews go to the
// apiserver with the gateway's own identity: kc's, or those of
// --authentication-kubeconfig and --authorization-kubeconfig when set (a
// gateway reading from another kubegate, which serves no reviews). It
// fails when the apiserver chosen for a review does not serve it.
func newAuth(cfg config.Config, kc *rest.Config, mgr *informer.Manager, reg prometheus.Registerer, log *zap.Logger, opts Options) (*authParts, error) {
	c := cfg.Auth
	m := auth.NewMetrics(reg)
	p := &authParts{limiter: auth.NewRateLimiter(auth.RateLimitOptions{
		QPS: c.UserQPS, Burst: c.UserBurst, MaxInflight: c.UserMaxInflight,
	}, m)}
	var err error
	if p.proxies, err = auth.ParseTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, err
	}
	// Every review, of either kind, waits for its turn in one set of fair
	// queues, paced at the gateway's client rate (apiserver.qps), so
	// that the client's own limiter, first come first served, never
	// makes them wait again.
	queue, err := auth.NewReviewQueue(auth.ReviewQueueOptions{
		Concurrency: c.ReviewConcurrency, QueueLength: c.ReviewQueueLength, MaxWait: time.Duration(c.ReviewMaxWait),
		QPS: float64(cfg.APIServer.QPS), Burst: cfg.APIServer.Burst, Metrics: m,
	})
	if err != nil {
		return nil, err
	}
	// Failed credentials are limited per client address, on the API and
	// at /login alike.
	failures := auth.NewFailureBudget(auth.FailureBudgetOptions{QPS: c.FailedAuthQPS, Burst: c.FailedAuthBurst, Metrics: m})

	var tokens auth.TokenAuthenticator
	switch {
	case c.Authn != "none" && opts.TokenAuthenticator != nil:
		tokens = opts.TokenAuthenticator
		log.Info("authentication: bearer tokens checked by the authenticator given")
	case c.Authn == "kubernetes":
		client, host, err := reviewClient(cfg, kc, tokenReviewAPI)
		if err != nil {
			return nil, err
		}
		tr, err := auth.NewTokenReview(auth.TokenReviewOptions{
			Client: client, Audiences: c.Audiences,
			SuccessTTL: ttl(c.TokenSuccessTTL), FailureTTL: ttl(c.TokenFailureTTL),
			Queue: queue, Metrics: m, Logger: log.Named("tokenreview"),
		})
		if err != nil {
			return nil, err
		}
		tokens = tr
		log.Info("authentication: bearer tokens checked with TokenReview", zap.String("apiserver", host),
			zap.Duration("successTTL", time.Duration(c.TokenSuccessTTL)), zap.Duration("failureTTL", time.Duration(c.TokenFailureTTL)))
	case c.Authn == "token-file":
		tf, err := auth.LoadTokenFile(c.TokenFile)
		if err != nil {
			return nil, err
		}
		tokens = tf
		log.Info("authentication: static token file", zap.String("file", c.TokenFile), zap.Int("tokens", tf.Len()))
	case c.Authn == "none":
		p.authenticator = auth.Anonymous{}
		log.Warn("AUTHENTICATION IS DISABLED (--authn=none): every caller is system:anonymous",
			zap.String("listen", cfg.Listen), zap.Bool("loopback", config.IsLoopback(cfg.Listen)))
		if !config.IsLoopback(cfg.Listen) {
			log.Warn("ANONYMOUS ACCESS ON A NON-LOOPBACK ADDRESS (--insecure-allow-anonymous): anyone who can reach " +
				cfg.Listen + " reads what system:anonymous may read")
		}
	default:
		return nil, fmt.Errorf("unknown --authn %q", c.Authn)
	}
	if tokens != nil {
		b, err := auth.NewBearer(auth.BearerOptions{
			Tokens: tokens, AllowedOrigins: cfg.WebSocket.AllowedOrigins, Failures: failures, Metrics: m, Logger: log.Named("authn"),
		})
		if err != nil {
			return nil, err
		}
		p.authenticator = b
		p.login, err = auth.NewLogin(auth.LoginOptions{
			Tokens: tokens, AllowedOrigins: cfg.WebSocket.AllowedOrigins, Metrics: m, Logger: log.Named("login"),
			// Failed logins spend their address's budget, as failed API
			// requests do; successful ones are limited per user name (a
			// login sets a cookie, nothing a user needs often).
			Failures: failures,
			Users:    auth.NewRateLimiter(auth.RateLimitOptions{QPS: 1, Burst: 10}, nil),
		})
		if err != nil {
			return nil, err
		}
	}

	switch c.Authz {
	case "rbac":
		client, host, err := reviewClient(cfg, kc, accessReviewAPI)
		if err != nil {
			return nil, err
		}
		a, err := auth.NewSubjectAccessReview(auth.SubjectAccessReviewOptions{
			Client: client, Namespaces: namespaces.FromInformer(mgr), Objects: namespaces.FromInformer(mgr),
			AllowTTL: ttl(c.AllowTTL), DenyTTL: ttl(c.DenyTTL), ScanTTL: ttl(c.NamespaceScanTTL),
			Queue: queue, Metrics: m, Logger: log.Named("authz"),
		})
		if err != nil {
			return nil, err
		}
		p.authorizer = a
		log.Info("authorization: RBAC via SubjectAccessReview", zap.String("apiserver", host),
			zap.Duration("allowTTL", time.Duration(c.AllowTTL)), zap.Duration("denyTTL", time.Duration(c.DenyTTL)),
			zap.Duration("namespaceScanTTL", time.Duration(c.NamespaceScanTTL)))
	case "always-allow":
		p.authorizer = auth.AlwaysAllow{}
		log.Warn("AUTHORIZATION IS DISABLED (--authz=always-allow): every caller reads everything the gateway can read")
	default:
		return nil, fmt.Errorf("unknown --authz %q", c.Authz)
	}
	if opts.WrapAuthorizer != nil {
		p.authorizer = opts.WrapAuthorizer(p.authorizer)
	}
	return p, nil
}

// ttl maps a configured cache lifetime to the auth package's: 0 (caching
// off in the file) becomes negative, since 0 means "default" there.
func ttl(d config.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return time.Duration(d)
}

// reviewAPI is a review the gateway makes for its callers, and where it is
// configured.
type reviewAPI struct {
	name       string // the review's kind, for messages
	groupVer   string // its group version in discovery
	resource   string
	flag       string // the flag choosing its apiserver
	mode       string // the mode that makes it
	kubeconfig func(config.Auth) string
}

var (
	tokenReviewAPI = reviewAPI{name: "TokenReview", groupVer: "authentication.k8s.io/v1", resource: "tokenreviews",
		flag: "--authentication-kubeconfig", mode: "--authn=kubernetes",
		kubeconfig: func(a config.Auth) string { return a.AuthenticationKubeconfig }}
	accessReviewAPI = reviewAPI{name: "SubjectAccessReview", groupVer: "authorization.k8s.io/v1", resource: "subjectaccessreviews",
		flag: "--authorization-kubeconfig", mode: "--authz=rbac",
		kubeconfig: func(a config.Auth) string { return a.AuthorizationKubeconfig }}
)

// reviewClient is the client api's reviews are made with: kc's, or that
// of the kubeconfig given for them, with the same user agent and request
// limits. It checks, with one discovery request, that its apiserver
// serves the review: a kubegate does not (it serves only reads), and a
// gateway reading from one whose reviews went there would refuse every
// caller. Like an unreachable apiserver at startup, that is an error.
func reviewClient(cfg config.Config, kc *rest.Config, api reviewAPI) (client kubernetes.Interface, host string, err error) {
	rc, source := kc, "the upstream the gateway reads from"
	if path := api.kubeconfig(cfg.Auth); path != "" {
		c := cfg
		c.Kubeconfig = path
		if rc, _, err = clientConfig(c, nil); err != nil {
			return nil, "", fmt.Errorf("%s: %w", api.flag, err)
		}
		source = api.flag + "'s apiserver"
	}
	probe := rest.CopyConfig(rc)
	probe.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return nil, "", fmt.Errorf("%s client: %w", api.name, err)
	}
	list, err := dc.ServerResourcesForGroupVersion(api.groupVer)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("cannot check that %s (%s) serves %s for %s: %v", source, rc.Host, api.name, api.mode, err)
	}
	if err != nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
		return r.Name == api.resource && slices.Contains(r.Verbs, "create")
	}) {
		return nil, "", fmt.Errorf("%s checks callers with %s, which %s (%s) does not serve (is it another kubegate?): point %s at the kube-apiserver",
			api.mode, api.name, source, rc.Host, api.flag)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, "", fmt.Errorf("%s client: %w", api.name, err)
	}
	return cs, rc.Host, nil
}

// credentialsHint explains a 401 from an http:// upstream: client-go takes
// no credentials from a kubeconfig for a server it reaches without TLS,
// so a gateway reading from another kubegate served over plain HTTP
// reaches it anonymously.
func credentialsHint(kc *rest.Config, err error) string {
	if !apierrors.IsUnauthorized(err) || rest.IsConfigTransportTLS(*kc) {
		return ""
	}
	return fmt.Sprintf(" (client-go sends a kubeconfig's credentials only to an https server, and %s is http: serve the upstream over https)", kc.Host)
}
