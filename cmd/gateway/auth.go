package main

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
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
}

// newAuth builds what --authn and --authz ask for. Reviews go to the
// apiserver with the gateway's own identity (kc).
func newAuth(cfg config.Config, kc *rest.Config, mgr *informer.Manager, reg prometheus.Registerer, log *zap.Logger) (*authParts, error) {
	c := cfg.Auth
	m := auth.NewMetrics(reg)
	p := &authParts{limiter: auth.NewRateLimiter(auth.RateLimitOptions{
		QPS: c.UserQPS, Burst: c.UserBurst, MaxInflight: c.UserMaxInflight,
	}, m)}
	var client kubernetes.Interface
	if c.Authn == "kubernetes" || c.Authz == "rbac" {
		cs, err := kubernetes.NewForConfig(kc)
		if err != nil {
			return nil, fmt.Errorf("auth client: %w", err)
		}
		client = cs
	}

	var tokens auth.TokenAuthenticator
	switch c.Authn {
	case "kubernetes":
		tr, err := auth.NewTokenReview(auth.TokenReviewOptions{
			Client: client, Audiences: c.Audiences,
			SuccessTTL: ttl(c.TokenSuccessTTL), FailureTTL: ttl(c.TokenFailureTTL),
			Metrics: m, Logger: log.Named("tokenreview"),
		})
		if err != nil {
			return nil, err
		}
		tokens = tr
		log.Info("authentication: bearer tokens checked with TokenReview",
			zap.Duration("successTTL", time.Duration(c.TokenSuccessTTL)), zap.Duration("failureTTL", time.Duration(c.TokenFailureTTL)))
	case "token-file":
		tf, err := auth.LoadTokenFile(c.TokenFile)
		if err != nil {
			return nil, err
		}
		tokens = tf
		log.Info("authentication: static token file", zap.String("file", c.TokenFile), zap.Int("tokens", tf.Len()))
	case "none":
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
			Tokens: tokens, AllowedOrigins: cfg.WebSocket.AllowedOrigins, Metrics: m, Logger: log.Named("authn"),
		})
		if err != nil {
			return nil, err
		}
		p.authenticator = b
		p.login, err = auth.NewLogin(auth.LoginOptions{
			Tokens: tokens, AllowedOrigins: cfg.WebSocket.AllowedOrigins, Metrics: m, Logger: log.Named("login"),
			// Login attempts are limited per client address, more
			// tightly than reads: each failed guess may cost a review.
			Limiter: auth.NewRateLimiter(auth.RateLimitOptions{QPS: 1, Burst: 10}, m),
		})
		if err != nil {
			return nil, err
		}
	}

	switch c.Authz {
	case "rbac":
		a, err := auth.NewSubjectAccessReview(auth.SubjectAccessReviewOptions{
			Client: client, Namespaces: namespaces.FromInformer(mgr),
			AllowTTL: ttl(c.AllowTTL), DenyTTL: ttl(c.DenyTTL), ScanTTL: ttl(c.NamespaceScanTTL),
			Metrics: m, Logger: log.Named("authz"),
		})
		if err != nil {
			return nil, err
		}
		p.authorizer = a
		log.Info("authorization: RBAC via SubjectAccessReview",
			zap.Duration("allowTTL", time.Duration(c.AllowTTL)), zap.Duration("denyTTL", time.Duration(c.DenyTTL)),
			zap.Duration("namespaceScanTTL", time.Duration(c.NamespaceScanTTL)))
	case "always-allow":
		p.authorizer = auth.AlwaysAllow{}
		log.Warn("AUTHORIZATION IS DISABLED (--authz=always-allow): every caller reads everything the gateway can read")
	default:
		return nil, fmt.Errorf("unknown --authz %q", c.Authz)
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
