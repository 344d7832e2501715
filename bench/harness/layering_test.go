package harness

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyToolsImportBench checks that the load tools' packages stay
// theirs: outside bench/, only kubegate-bench's command and the soak may
// import them, test files included. Product packages measure nothing
// here, and a test that needs a fixture keeps its own (a package that
// borrowed the load tool's Pod pulled in a control plane with it).
func TestOnlyToolsImportBench(t *testing.T) {
	root := filepath.Join("..", "..")
	allowed := []string{"bench/", "cmd/kubegate-bench/", "internal/soak/"}
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		for _, a := range allowed {
			if strings.HasPrefix(rel, a) {
				return nil
			}
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "kubegate/bench" || strings.HasPrefix(p, "kubegate/bench/") {
				t.Errorf("%s imports %s: only kubegate-bench and the soak may", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d Go files under %s", checked, root)
	}
}
