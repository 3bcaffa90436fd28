package wallclock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The offset of LOCKX_TEST_CLOCK_OFFSET must never reach production: only
// internal/testenv, which applies it from testenv.Main in test binaries,
// may assign wallclock.Now or read the variable. The check parses every Go
// file of the tree, the nested modules included.
func TestOnlyTestenvMovesTheClock(t *testing.T) {
	root := filepath.Join("..", "..")
	// clock.go moves it; clock_test.go checks that it does and restores it.
	const allowed, allowedTest = "internal/testenv/clock.go", "internal/testenv/clock_test.go"
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || n == "vendor" || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if rel == allowed || rel == allowedTest || !strings.Contains(string(src), "Now") && !strings.Contains(string(src), "LOCKX_TEST_CLOCK_OFFSET") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		inPkg := f.Name.Name == "wallclock"
		ast.Inspect(f, func(n ast.Node) bool {
			var targets []ast.Expr
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind == token.STRING && strings.Contains(n.Value, "LOCKX_TEST_CLOCK_OFFSET") && !strings.HasSuffix(rel, "_test.go") {
					t.Errorf("%s: names LOCKX_TEST_CLOCK_OFFSET: only %s may read it", fset.Position(n.Pos()), allowed)
				}
			case *ast.AssignStmt:
				targets = n.Lhs
			case *ast.UnaryExpr:
				if n.Op == token.AND {
					targets = []ast.Expr{n.X}
				}
			}
			for _, e := range targets {
				if isWallclockNow(e, inPkg) {
					t.Errorf("%s: assigns wallclock.Now (or takes its address): only %s may move the clock", fset.Position(e.Pos()), allowed)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files from %s: not the tree", files, root)
	}
}

func isWallclockNow(e ast.Expr, inPkg bool) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "wallclock" && e.Sel.Name == "Now"
	case *ast.Ident:
		return inPkg && e.Name == "Now"
	}
	return false
}
