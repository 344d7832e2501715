package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Spec declares one receiver of resource events: one entry of the
// configuration file's `webhooks:` list (internal/config).
// Field comments give the defaults applied by WithDefaults.
type Spec struct {
	// Name identifies the webhook in logs and metrics. Required; a DNS
	// label (lower case letters, digits and '-', at most 63 characters),
	// unique among webhooks.
	Name string `json:"name"`
	// URL receives the POSTs. Required; absolute http or https.
	URL string `json:"url"`
	// Resources are the watched resources with their filters. At least one.
	// A resource may be listed more than once only for different
	// namespaces (checked when the webhook starts, once names are
	// resolved).
	Resources []Resource `json:"resources"`
	// EventTypes are the event kinds sent: added, modified, deleted, sync.
	// Default all four. The reset and snapshot.end markers are always
	// sent.
	EventTypes []string `json:"eventTypes,omitempty"`
	// ResyncPeriod re-sends every matching object as a sync event this
	// often. Default 0 (never).
	ResyncPeriod metav1.Duration `json:"resyncPeriod,omitempty"`
	// SecretFile and SecretEnv name where the signing secrets are read
	// from: a file or an environment variable holding one or more
	// whitespace-separated `whsec_<base64>` secrets. Every secret signs
	// each request, so a receiver can rotate keys. Exactly one is required.
	SecretFile string `json:"secretFile,omitempty"`
	SecretEnv  string `json:"secretEnv,omitempty"`
	// Source is the CloudEvents `source` attribute. Default: the gateway's
	// source (the apiserver URL).
	Source string `json:"source,omitempty"`
	// Timeout bounds each delivery attempt. Default 10s.
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// Retry is the retry policy.
	Retry Retry `json:"retry"`
	// Format is cloudevents (CloudEvents 1.0 structured JSON) or watch
	// (the Kubernetes watch event {"type","object"}). Default cloudevents.
	Format string `json:"format,omitempty"`
	// AllowAddresses are CIDRs the webhook may connect to even though they
	// are refused by default (loopback, link-local including cloud
	// metadata, unspecified), for in-cluster or local receivers. Default
	// none.
	AllowAddresses []string `json:"allowAddresses,omitempty"`
	// DenyAddresses are further CIDRs refused, for example the cluster's
	// pod and service ranges. Checked when connecting. Default none.
	DenyAddresses []string `json:"denyAddresses,omitempty"`
	// MaxEvents bounds each resource's backlog; past it the backlog
	// collapses to the latest state per object. Default 4096.
	MaxEvents int `json:"maxEvents,omitempty"`
}

// Resource selects the objects of one resource, as a list or watch
// request would.
type Resource struct {
	// Resource is a name kubectl accepts (pods, deployments.apps, a CRD).
	Resource string `json:"resource"`
	// Namespace restricts to one namespace. Default all.
	Namespace     string `json:"namespace,omitempty"`
	LabelSelector string `json:"labelSelector,omitempty"`
	FieldSelector string `json:"fieldSelector,omitempty"`
}

// Retry is a delivery retry policy. Once an event has been
// attempted MaxAttempts times, or MaxAge after its first attempt, the
// webhook gives up on it and sends a reset and the current state instead.
type Retry struct {
	// MaxAttempts bounds attempts per event. Default 12.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// MaxAge bounds the time an event is retried. Default 1h.
	MaxAge metav1.Duration `json:"maxAge,omitempty"`
	// InitialBackoff is the first backoff ceiling; it doubles per attempt
	// and the wait is drawn uniformly below it (full jitter). Default 1s.
	InitialBackoff metav1.Duration `json:"initialBackoff,omitempty"`
	// MaxBackoff caps the backoff ceiling. Default 5m.
	MaxBackoff metav1.Duration `json:"maxBackoff,omitempty"`
}

// Spec event types and formats.
var (
	EventTypes = []string{"added", "modified", "deleted", "sync"}
	validName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// WithDefaults returns w with zero fields set to their defaults.
func (w Spec) WithDefaults() Spec {
	if len(w.EventTypes) == 0 {
		w.EventTypes = append([]string(nil), EventTypes...)
	}
	if w.Timeout.Duration == 0 {
		w.Timeout = metav1.Duration{Duration: 10 * time.Second}
	}
	if w.Format == "" {
		w.Format = "cloudevents"
	}
	if w.MaxEvents == 0 {
		w.MaxEvents = 4096
	}
	r := &w.Retry
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 12
	}
	if r.MaxAge.Duration == 0 {
		r.MaxAge = metav1.Duration{Duration: time.Hour}
	}
	if r.InitialBackoff.Duration == 0 {
		r.InitialBackoff = metav1.Duration{Duration: time.Second}
	}
	if r.MaxBackoff.Duration == 0 {
		r.MaxBackoff = metav1.Duration{Duration: 5 * time.Minute}
	}
	return w
}

// Secrets reads and decodes the webhook's signing secrets.
func (w Spec) Secrets() ([][]byte, error) {
	var raw, from string
	switch {
	case w.SecretFile != "" && w.SecretEnv != "":
		return nil, errors.New("set only one of secretFile and secretEnv")
	case w.SecretFile != "":
		from = "secretFile " + w.SecretFile
		b, err := os.ReadFile(w.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("secretFile: %w", err)
		}
		raw = string(b)
	case w.SecretEnv != "":
		from = "secretEnv " + w.SecretEnv
		v, ok := os.LookupEnv(w.SecretEnv)
		if !ok {
			return nil, fmt.Errorf("secretEnv: environment variable %s is not set", w.SecretEnv)
		}
		raw = v
	default:
		return nil, errors.New("a signing secret is required: set secretFile or secretEnv")
	}
	var out [][]byte
	for i, s := range strings.Fields(raw) {
		key, err := DecodeSecret(s)
		if err != nil {
			// Never echo the secret itself.
			return nil, fmt.Errorf("%s: secret %d: %w", from, i+1, err)
		}
		out = append(out, key)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no secret found", from)
	}
	return out, nil
}

// DecodeSecret decodes a Standard Webhooks secret, "whsec_" followed
// by base64 of at least 24 bytes.
func DecodeSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, errors.New(`want "whsec_" followed by base64`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New(`the part after "whsec_" is not valid base64`)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("the key is %d bytes; want 24 to 64", len(key))
	}
	return key, nil
}

// Validate checks a webhook list, naming the webhook and field of
// each problem. It reads the secrets, so a missing one fails at load.
func Validate(hooks []Spec) error {
	var errs []error
	seen := map[string]bool{}
	for i, w := range hooks {
		w = w.WithDefaults()
		at := fmt.Sprintf("webhooks[%d]", i)
		if w.Name != "" {
			at += fmt.Sprintf(" (%s)", w.Name)
		}
		bad := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s: %s", at, field, fmt.Sprintf(format, args...)))
		}
		switch {
		case w.Name == "":
			bad("name", "required")
		case len(w.Name) > 63 || !validName.MatchString(w.Name):
			bad("name", "%q: want lower case letters, digits and '-', at most 63 characters", w.Name)
		case seen[w.Name]:
			bad("name", "%q is used by another webhook", w.Name)
		}
		seen[w.Name] = true
		if err := validateURL(w.URL); err != nil {
			bad("url", "%v", err)
		}
		if len(w.Resources) == 0 {
			bad("resources", "at least one resource is required")
		}
		for j, r := range w.Resources {
			field := fmt.Sprintf("resources[%d]", j)
			if strings.TrimSpace(r.Resource) == "" {
				bad(field+".resource", "required")
			}
			if r.Namespace != "" {
				if msgs := validation.IsDNS1123Label(r.Namespace); len(msgs) > 0 {
					bad(field+".namespace", "%q: %s", r.Namespace, strings.Join(msgs, "; "))
				}
			}
			if _, err := labels.Parse(r.LabelSelector); err != nil {
				bad(field+".labelSelector", "%v", err)
			}
			if _, err := fields.ParseSelector(r.FieldSelector); err != nil {
				bad(field+".fieldSelector", "%v", err)
			}
		}
		types := map[string]bool{}
		for _, t := range w.EventTypes {
			switch {
			case !slices.Contains(EventTypes, t):
				bad("eventTypes", "%q: want added, modified, deleted or sync", t)
			case types[t]:
				bad("eventTypes", "%q is listed twice", t)
			}
			types[t] = true
		}
		if w.ResyncPeriod.Duration < 0 {
			bad("resyncPeriod", "must not be negative")
		}
		if _, err := w.Secrets(); err != nil {
			bad("secret", "%v", err)
		}
		if w.Timeout.Duration <= 0 || w.Timeout.Duration > 5*time.Minute {
			bad("timeout", "%s: want more than 0 and at most 5m", w.Timeout.Duration)
		}
		switch w.Format {
		case "cloudevents", "watch":
		default:
			bad("format", "%q: want cloudevents or watch", w.Format)
		}
		for _, l := range []struct {
			name string
			v    []string
		}{{"allowAddresses", w.AllowAddresses}, {"denyAddresses", w.DenyAddresses}} {
			for _, c := range l.v {
				if _, err := netip.ParsePrefix(c); err != nil {
					bad(l.name, "%q: want a CIDR such as 10.0.0.0/8", c)
				}
			}
		}
		if w.MaxEvents < 0 {
			bad("maxEvents", "must not be negative")
		}
		r := w.Retry
		if r.MaxAttempts < 0 {
			bad("retry.maxAttempts", "must not be negative")
		}
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"maxAge", r.MaxAge.Duration}, {"initialBackoff", r.InitialBackoff.Duration}, {"maxBackoff", r.MaxBackoff.Duration}} {
			if d.v < 0 {
				bad("retry."+d.name, "must not be negative")
			}
		}
		if r.InitialBackoff.Duration > r.MaxBackoff.Duration {
			bad("retry.initialBackoff", "%s is more than maxBackoff %s", r.InitialBackoff.Duration, r.MaxBackoff.Duration)
		}
	}
	return errors.Join(errs...)
}

func validateURL(s string) error {
	if s == "" {
		return errors.New("required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: want an http or https URL", s)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%q: host is missing", s)
	}
	if u.User != nil {
		return fmt.Errorf("%q: credentials in the URL are not allowed; the request is signed", s)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%q: a fragment is not allowed", s)
	}
	return nil
}
