package captest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestListMatchesDriver parses package driver and fails when its capability
// interfaces and Capabilities differ: a capability added to driver must be
// registered here, and then every wrapper's Check covers it.
func TestListMatchesDriver(t *testing.T) {
	dir := filepath.Join("..", "..", "lockx", "driver")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var declared []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if _, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.IsExported() && ts.Name.Name != "Backend" {
					declared = append(declared, ts.Name.Name)
				}
			}
		}
	}
	var listed []string
	for _, c := range Capabilities {
		listed = append(listed, c.Name)
	}
	listed = append(listed, Standalone...)
	slices.Sort(declared)
	slices.Sort(listed)
	if len(declared) < 10 {
		t.Fatalf("found only %v in %s: is the parse looking in the right place?", declared, dir)
	}
	if !slices.Equal(declared, listed) {
		t.Errorf("driver declares capability interfaces %v, captest lists %v: register every capability (or Standalone store)", declared, listed)
	}
}
