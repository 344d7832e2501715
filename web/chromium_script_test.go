package web

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestChromiumScript runs hack/debian-tool.sh as `make chromium` does, to
// install the browser these tests need (and as `make node` does for a
// module file), against stub commands: it must install when it can, never
// wait for a password, and say what to do when it cannot.
func TestChromiumScript(t *testing.T) {
	script, err := filepath.Abs("../hack/debian-tool.sh")
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	chmod, err := exec.LookPath("chmod") // for the stubs that install
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		uid     string
		stubs   map[string]string // command → script body
		env     []string
		wantErr bool
		want    string   // in the output
		calls   string   // the stubs' calls, in order
		args    []string // the script's arguments, "{dir}" for the test's directory; default chromium's
		files   []string // files to create first, "{dir}" as in args
	}{
		{
			name:  "already installed",
			uid:   "1000",
			stubs: map[string]string{"chromium": `echo "Chromium 1"`},
		},
		{
			name: "CHROMIUM set",
			uid:  "1000",
			env:  []string{"CHROMIUM=/opt/browser"},
		},
		{
			name: "root installs",
			uid:  "0",
			stubs: map[string]string{"apt-get": `echo "apt-get $*" >>"$CALLS"
if [[ $1 == install ]]; then printf '#!/bin/sh\necho "Chromium 2"\n' >"$STUBS/chromium"; "$CHMOD" +x "$STUBS/chromium"; fi`},
			want:  "installed Chromium 2",
			calls: "apt-get update -qq\napt-get install -y -qq --no-install-recommends chromium\n",
		},
		{
			name: "passwordless sudo installs",
			uid:  "1000",
			stubs: map[string]string{
				"sudo":    `echo "sudo $*" >>"$CALLS"; shift; "$@"`,
				"true":    `exit 0`,
				"apt-get": `if [[ $1 == install ]]; then printf '#!/bin/sh\necho "Chromium 3"\n' >"$STUBS/chromium"; "$CHMOD" +x "$STUBS/chromium"; fi`,
			},
			want:  "installed Chromium 3",
			calls: "sudo -n true\nsudo -n apt-get update -qq\nsudo -n apt-get install -y -qq --no-install-recommends chromium\n",
		},
		{
			name:    "sudo wants a password",
			uid:     "1000",
			stubs:   map[string]string{"sudo": `echo "sudo $*" >>"$CALLS"; exit 1`, "apt-get": `echo "apt-get $*" >>"$CALLS"`},
			wantErr: true,
			want:    "sudo needs a password",
			calls:   "sudo -n true\n",
		},
		{
			name:    "no sudo",
			uid:     "1000",
			stubs:   map[string]string{"apt-get": `echo "apt-get $*" >>"$CALLS"`},
			wantErr: true,
			want:    "sudo is not installed",
		},
		{
			name:    "no apt-get",
			uid:     "0",
			wantErr: true,
			want:    "apt-get not found",
		},
		{
			name:    "apt-get fails",
			uid:     "0",
			stubs:   map[string]string{"apt-get": `echo "apt-get $*" >>"$CALLS"; [[ $1 == update ]]`},
			wantErr: true,
			want:    "apt-get failed",
			calls:   "apt-get update -qq\napt-get install -y -qq --no-install-recommends chromium\n",
		},
		{
			name:  "module file present",
			uid:   "1000",
			args:  []string{"{dir}/nodejs/ws/package.json", "node-ws", "NODE_WS", "the JavaScript client's tests"},
			files: []string{"{dir}/nodejs/ws/package.json"},
		},
		{
			name: "module file installed",
			uid:  "0",
			args: []string{"{dir}/nodejs/ws/package.json", "node-ws", "NODE_WS", "the JavaScript client's tests"},
			stubs: map[string]string{"apt-get": `echo "apt-get $*" >>"$CALLS"
if [[ $1 == install ]]; then echo '{}' >"$DIR/nodejs/ws/package.json"; fi`},
			files: []string{"{dir}/nodejs/ws/.keep"},
			want:  "installed node-ws",
			calls: "apt-get update -qq\napt-get install -y -qq --no-install-recommends node-ws\n",
		},
		{
			name:    "module file not installed",
			uid:     "0",
			args:    []string{"{dir}/nodejs/ws/package.json", "node-ws", "NODE_WS", "the JavaScript client's tests"},
			stubs:   map[string]string{"apt-get": `echo "apt-get $*" >>"$CALLS"`},
			wantErr: true,
			want:    "does not exist",
			calls:   "apt-get update -qq\napt-get install -y -qq --no-install-recommends node-ws\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := tc.args
			if args == nil {
				args = []string{"chromium", "chromium", "CHROMIUM", "the dashboard's browser tests"}
			}
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "{dir}", dir)
			}
			for _, f := range tc.files {
				f = strings.ReplaceAll(f, "{dir}", dir)
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stubs := filepath.Join(dir, "bin")
			calls := filepath.Join(dir, "calls")
			if err := os.Mkdir(stubs, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.stubs = mergeStubs(map[string]string{"id": "echo " + tc.uid}, tc.stubs)
			for name, body := range tc.stubs {
				if err := os.WriteFile(filepath.Join(stubs, name), []byte("#!"+bash+"\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bash, append([]string{script}, args...)...)
			// Only the stubs are on PATH: nothing real is installed or run.
			cmd.Env = append([]string{"PATH=" + stubs, "STUBS=" + stubs, "CALLS=" + calls, "CHMOD=" + chmod, "DIR=" + dir}, tc.env...)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v; output:\n%s", err, tc.wantErr, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output does not say %q:\n%s", tc.want, out)
			}
			if tc.wantErr && !strings.Contains(string(out), args[2]+"=") {
				t.Errorf("a failure does not say what to do:\n%s", out)
			}
			got, _ := os.ReadFile(calls)
			if string(got) != tc.calls {
				t.Errorf("calls:\n%s\nwant:\n%s", got, tc.calls)
			}
		})
	}
}

func mergeStubs(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}
