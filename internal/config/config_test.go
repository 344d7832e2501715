package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func parse(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return Parse(fs, args)
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	c, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Default(), c); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestFlagsWinOverFile(t *testing.T) {
	p := writeFile(t, `
listen: 0.0.0.0:9000
log: {level: debug, format: json}
cache:
  resources: [pods, deployments.apps]
  minResync: 30s
`)
	c, err := parse(t, "--config", p, "--listen", "127.0.0.1:7000", "--resources", "configmaps, secrets")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7000" || c.Log.Level != "debug" || c.Log.Format != "json" ||
		time.Duration(c.Cache.MinResync) != 30*time.Second ||
		!cmp.Equal(c.Cache.Resources, []string{"configmaps", "secrets"}) {
		t.Fatalf("got %+v", c)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		file string
		want string
	}{
		{"unknown flag", []string{"--nope"}, "", "flag provided but not defined"},
		{"bad level", []string{"--log-level", "loud"}, "", `log level "loud"`},
		{"bad format", []string{"--log-format", "xml"}, "", `log format "xml"`},
		{"bad listen", []string{"--listen", "8080"}, "", `listen "8080"`},
		{"stray arg", []string{"extra"}, "", `unexpected argument "extra"`},
		{"unknown field", nil, "lisen: x\n", `unknown field "lisen"`},
		{"bad duration", nil, "cache: {minResync: soon}\n", "invalid duration"},
		{"missing file", []string{"--config", "/nonexistent/kubegate.yaml"}, "", "read config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			_, err := parse(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
