// Package config holds the gateway's configuration: its defaults, the
// optional YAML file and the command-line flags, which win over the file.
package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is the gateway's whole configuration. Field comments give the
// defaults applied by Default.
type Config struct {
	// Kubeconfig is the kubeconfig file to use. Default: in-cluster config,
	// then $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Listen is the HTTP listen address. Default 127.0.0.1:8080.
	Listen string `json:"listen,omitempty"`
	// ShutdownTimeout bounds graceful shutdown. Default 15s.
	ShutdownTimeout Duration  `json:"shutdownTimeout,omitempty"`
	Log             Log       `json:"log"`
	Cache           Cache     `json:"cache"`
	WebSocket       WebSocket `json:"websocket"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `json:"level,omitempty"`
	// Format is console or json. Default console.
	Format string `json:"format,omitempty"`
}

// Cache configures the informers and listeners.
type Cache struct {
	// Resources are started at boot and gate readiness; others start on
	// first use. Names as kubectl accepts them. Default none.
	Resources []string `json:"resources,omitempty"`
	// KeepManagedFields keeps metadata.managedFields. Default false.
	KeepManagedFields bool `json:"keepManagedFields,omitempty"`
	// MinResync is the shortest per-listener resync period. Default 5s.
	MinResync Duration `json:"minResync,omitempty"`
	// HistoryEvents bounds each resource's resume history. Default 10000.
	HistoryEvents int `json:"historyEvents,omitempty"`
	// ListenerMaxEvents bounds each listener's backlog. Default 4096.
	ListenerMaxEvents int `json:"listenerMaxEvents,omitempty"`
	// ListenerMaxBytes bounds each listener's backlog in bytes. Default 16 MiB.
	ListenerMaxBytes int64 `json:"listenerMaxBytes,omitempty"`
}

// WebSocket configures /ws.
type WebSocket struct {
	// AllowedOrigins are host patterns browsers may connect from, in
	// addition to the gateway's own host. Default none.
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// MaxSockets bounds open sockets. Default 10000.
	MaxSockets int `json:"maxSockets,omitempty"`
	// MaxSocketsPerClient bounds sockets per client. Default 100.
	MaxSocketsPerClient int `json:"maxSocketsPerClient,omitempty"`
	// MaxSubscriptionsPerSocket bounds subscriptions per socket. Default 100.
	MaxSubscriptionsPerSocket int `json:"maxSubscriptionsPerSocket,omitempty"`
	// PingInterval is the keepalive period. Default 30s.
	PingInterval Duration `json:"pingInterval,omitempty"`
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		Listen:          "127.0.0.1:8080",
		ShutdownTimeout: Duration(15 * time.Second),
		Log:             Log{Level: "info", Format: "console"},
		Cache:           Cache{MinResync: Duration(5 * time.Second), HistoryEvents: 10000},
	}
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration time.Duration

// UnmarshalJSON accepts "30s" style strings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %s: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes "30s" style strings.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// Load reads a YAML file over base. Unknown fields are errors, so a typo
// does not silently fall back to a default.
func Load(path string, base Config) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return base, fmt.Errorf("read config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &base); err != nil {
		return base, fmt.Errorf("config %s: %w", path, err)
	}
	return base, nil
}

// Validate checks values that flags and files cannot type-check.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen %q: %w", c.Listen, err))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log level %q: want debug, info, warn or error", c.Log.Level))
	}
	switch c.Log.Format {
	case "console", "json":
	default:
		errs = append(errs, fmt.Errorf("log format %q: want console or json", c.Log.Format))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("shutdownTimeout must be positive"))
	}
	return errors.Join(errs...)
}

// Parse builds the configuration from args: defaults, then the --config
// file, then every flag given explicitly.
func Parse(fs *flag.FlagSet, args []string) (Config, error) {
	c := Default()
	var (
		configPath string
		resources  string
		shutdown   time.Duration
		minResync  time.Duration
	)
	fs.StringVar(&configPath, "config", "", "YAML configuration `file`; flags given on the command line override it")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig `file` (default: in-cluster config, then $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "HTTP listen `address`")
	fs.StringVar(&c.Log.Level, "log-level", c.Log.Level, "log `level`: debug, info, warn or error")
	fs.StringVar(&c.Log.Format, "log-format", c.Log.Format, "log `format`: console or json")
	fs.StringVar(&resources, "resources", "", "comma-separated `resources` to cache at start and gate readiness on (e.g. pods,deployments.apps)")
	fs.DurationVar(&shutdown, "shutdown-timeout", time.Duration(c.ShutdownTimeout), "bound on graceful shutdown")
	fs.DurationVar(&minResync, "min-resync", time.Duration(c.Cache.MinResync), "shortest resync period a client may ask for")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if configPath != "" {
		fromFile, err := Load(configPath, Default())
		if err != nil {
			return c, err
		}
		// Re-apply explicitly set flags over the file.
		flagged := c
		c = fromFile
		if set["kubeconfig"] {
			c.Kubeconfig = flagged.Kubeconfig
		}
		if set["listen"] {
			c.Listen = flagged.Listen
		}
		if set["log-level"] {
			c.Log.Level = flagged.Log.Level
		}
		if set["log-format"] {
			c.Log.Format = flagged.Log.Format
		}
	}
	if set["resources"] {
		c.Cache.Resources = nil
		for _, r := range strings.Split(resources, ",") {
			if r = strings.TrimSpace(r); r != "" {
				c.Cache.Resources = append(c.Cache.Resources, r)
			}
		}
	}
	if set["shutdown-timeout"] {
		c.ShutdownTimeout = Duration(shutdown)
	}
	if set["min-resync"] {
		c.Cache.MinResync = Duration(minResync)
	}
	return c, c.Validate()
}
