package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLayering checks that the gateway's parts meet only here, in main:
// the packages below must not import those named, or a change to one
// part would ripple into another (docs/architecture.md, "Packages").
// Test files may import what they like.
func TestLayering(t *testing.T) {
	for _, rule := range []struct {
		dir       string
		forbidden []string
		why       string
	}{
		{"../../internal/apistatus", []string{"kubegate/"},
			"every layer uses it to answer clients: errors bring their own Status (apierrors.APIStatus)"},
		{"../../internal/auth", []string{"kubegate/internal/informer"},
			"auth asks for an auth.NamespaceLister; package namespaces adapts the informer to it"},
		{"../../internal/informer", []string{"kubegate/internal/auth", "kubegate/internal/apistatus",
			"kubegate/internal/http", "kubegate/internal/ws", "kubegate/internal/webhook", "kubegate/internal/sink"},
			"the cache knows nothing of its consumers"},
		{"../../internal/livequery", []string{"kubegate/internal/informer"},
			"the window engine is a library; package livequery/feed feeds it from the informer"},
		{"../../internal/sink", []string{"kubegate/internal/auth", "kubegate/internal/apistatus",
			"kubegate/internal/http", "kubegate/internal/ws", "kubegate/internal/webhook"},
			"the sinks share the pop step; it knows none of them"},
	} {
		for path, file := range imports(t, rule.dir) {
			for _, f := range rule.forbidden {
				if strings.HasPrefix(path, f) {
					t.Errorf("%s imports %s: %s", file, path, rule.why)
				}
			}
		}
	}
}

// imports returns the import paths of the non-test Go files in dir, each
// with a file that imports it.
func imports(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			out[path] = name
		}
	}
	return out
}
