package gateway_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "kubegate/"

// layers gives, for every package of the module, the module's packages
// its non-test files may import, and why. The parts meet only in package
// gateway; none reaches into another's package for what it needs
// (docs/architecture.md, "Packages"). A package missing here fails the
// test: a new one declares its place.
var layers = map[string]struct {
	imports []string
	why     string
}{
	"internal/apistatus": {nil, "every layer uses it to answer clients: errors bring their own Status (apierrors.APIStatus)"},
	"internal/informer":  {nil, "the cache knows nothing of its consumers"},
	"internal/sink":      {[]string{"internal/informer"}, "the sinks share the pop step; it knows none of them"},
	"internal/cell":      {nil, "typed cell values: rows compute them, the live tables sort by them"},
	"internal/livequery": {[]string{"internal/apistatus", "internal/cell"}, "the window engine is a library; package livequery/feed feeds it from the informer"},
	"internal/livequery/feed": {[]string{"internal/informer", "internal/livequery"},
		"feeds the engine from the informer"},
	"internal/livequery/wire": {[]string{"internal/informer", "internal/livequery", "internal/livequery/feed", "internal/rows"},
		"the parameters clients send, and each resource's table schema"},
	"internal/rows": {[]string{"internal/informer", "internal/cell"},
		"rows are computed from cached objects; no arrow up to the live tables"},
	"internal/rows/rowstest": {[]string{"internal/informer"}, "tests' Tables as kube-apiserver printed them"},
	"internal/namespaces": {[]string{"internal/informer"},
		"adapts the informer to auth.NamespaceLister, so that auth imports no informer"},
	"internal/auth":        {[]string{"internal/apistatus"}, "auth asks for what it needs as its own small interfaces"},
	"internal/webhook":     {[]string{"internal/informer", "internal/sink"}, "a sink of the informer; configured by its own Spec"},
	"internal/servingcert": {nil, "a certificate pair from files"},
	"internal/openapi":     {[]string{"internal/apistatus"}, "a cache of the apiserver's OpenAPI documents, mounted by the server"},
	"internal/config": {[]string{"internal/livequery", "internal/webhook", "internal/ws"},
		"the file's schema composes the parts' own specs and defaults; no part imports it"},
	"internal/ws": {[]string{"internal/apistatus", "internal/auth", "internal/informer", "internal/livequery",
		"internal/livequery/feed", "internal/livequery/wire", "internal/rows", "internal/sink"}, "a reader"},
	"internal/http": {[]string{"internal/apistatus", "internal/auth", "internal/informer", "internal/livequery",
		"internal/livequery/feed", "internal/livequery/wire", "internal/rows", "internal/sink"}, "a reader"},
	"internal/gateway": {[]string{"internal/auth", "internal/config", "internal/http", "internal/informer",
		"internal/livequery", "internal/livequery/feed", "internal/livequery/wire", "internal/namespaces", "internal/openapi", "internal/servingcert",
		"internal/webhook", "internal/ws", "web"}, "the one place the parts are wired together"},
	"internal/gateway/gatewaytest": {[]string{"internal/config", "internal/gateway", "internal/testenv"},
		"runs the gateway in tests"},
	"internal/controlplane": {nil, "etcd and kube-apiserver for tests and make run"},
	"internal/testenv":      {[]string{"internal/controlplane"}, "the tests' control plane and helpers"},
	"internal/demo":         {nil, "the demo workload"},
	"internal/abuse":        {nil, "tests only"},
	"internal/faults":       {nil, "tests only"},
	"web":                   {[]string{"clients/js"}, "the dashboard serves the JavaScript client"},
	"clients/js":            {nil, "the JavaScript client's source"},
	"deploy":                {nil, "manifests and their tests"},
	"cmd/gateway":           {[]string{"internal/config", "internal/gateway"}, "flags, signals and the process; gateway.New builds the rest"},
	"hack/devcluster":       {[]string{"internal/controlplane", "internal/demo"}, "make run's control plane and demo workload"},
}

// benchTree are the load tools: they measure the product from outside and
// may import what they measure; no product package imports them.
var benchTree = []string{"bench", "cmd/kubegate-bench", "internal/soak"}

func inBenchTree(pkg string) bool {
	return slices.ContainsFunc(benchTree, func(p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") })
}

// constructors are the parts' constructors that only package gateway
// calls (a package's own tests may build it alone).
var constructors = map[string]string{
	"kubegate/internal/ws":      "New",
	"kubegate/internal/http":    "New",
	"kubegate/internal/webhook": "New",
}

// TestLayering checks the imports of every package of the module against
// layers, and that the gateway's parts are wired in package gateway only,
// tests included.
func TestLayering(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs := map[string][]string{} // package dir -> its Go files
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			pkgs[filepath.ToSlash(rel)] = append(pkgs[filepath.ToSlash(rel)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("found only %d packages under %s", len(pkgs), root)
	}
	fset := token.NewFileSet()
	for pkg, files := range pkgs {
		rule, declared := layers[pkg]
		if !declared && !inBenchTree(pkg) {
			t.Errorf("package %s is not in layers: declare what it may import", pkg)
		}
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			test := strings.HasSuffix(name, "_test.go")
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				dep, ok := strings.CutPrefix(p, module)
				if !ok {
					continue
				}
				if inBenchTree(dep) && !inBenchTree(pkg) {
					t.Errorf("%s imports %s: product packages and their tests do not depend on the load tools", name, p)
				}
				if !test && declared && !slices.Contains(rule.imports, dep) {
					t.Errorf("%s imports %s: %s (%s)", name, p, pkg, rule.why)
				}
			}
			checkConstructors(t, fset, f, name, pkg)
		}
	}
}

// checkConstructors fails on calls of a part's constructor outside
// package gateway and the part's own package.
func checkConstructors(t *testing.T, fset *token.FileSet, f *ast.File, name, pkg string) {
	t.Helper()
	if pkg == "internal/gateway" {
		return
	}
	local := map[string]string{} // import name -> path, for the constructors' packages
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := constructors[p]; !ok || module+pkg == p {
			continue
		}
		n := path.Base(p)
		if p == "kubegate/internal/http" {
			n = "httpapi"
		}
		if imp.Name != nil {
			n = imp.Name.Name
		}
		local[n] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && local[x.Name] != "" && sel.Sel.Name == constructors[local[x.Name]] {
			t.Errorf("%s: %s.%s: the gateway's parts are wired in internal/gateway only (gateway.New; tests use gatewaytest)",
				fset.Position(sel.Pos()), local[x.Name], sel.Sel.Name)
		}
		return true
	})
}
