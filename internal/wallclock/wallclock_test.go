package wallclock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goFile is one parsed Go file of the tree; rel is its slash path from the
// root of the repository.
type goFile struct {
	rel  string
	test bool
	f    *ast.File
}

// eachGoFile parses every Go file of the tree, the nested modules (bench,
// lockx/etcdlock, examples) included, and calls fn on each.
func eachGoFile(t *testing.T, fset *token.FileSet, fn func(goFile)) {
	t.Helper()
	root := filepath.Join("..", "..")
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
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files++
		fn(goFile{rel: filepath.ToSlash(rel), test: strings.HasSuffix(path, "_test.go"), f: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files from %s: not the tree", files, root)
	}
}

// The offset of LOCKX_TEST_CLOCK_OFFSET must never reach production: only
// internal/testenv, which applies it from testenv.Main in test binaries,
// may assign wallclock.Now or read the variable.
func TestOnlyTestenvMovesTheClock(t *testing.T) {
	// clock.go moves it; clock_test.go checks that it does and restores it.
	allowed := map[string]bool{"internal/testenv/clock.go": true, "internal/testenv/clock_test.go": true}
	fset := token.NewFileSet()
	eachGoFile(t, fset, func(g goFile) {
		if allowed[g.rel] {
			return
		}
		inPkg := g.f.Name.Name == "wallclock"
		ast.Inspect(g.f, func(n ast.Node) bool {
			var targets []ast.Expr
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind == token.STRING && strings.Contains(n.Value, "LOCKX_TEST_CLOCK_OFFSET") && !g.test {
					t.Errorf("%s: names LOCKX_TEST_CLOCK_OFFSET: only internal/testenv may read it", fset.Position(n.Pos()))
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
					t.Errorf("%s: assigns wallclock.Now (or takes its address): only internal/testenv may move the clock", fset.Position(e.Pos()))
				}
			}
			return true
		})
	})
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

// fixedInstants lists the files allowed to build fixed instants — time.Date,
// time.Unix* of a literal, a date in a string literal —, how many, and why
// no clock ever meets them there. One more fixed instant fails the test
// until it is built from now instead, or declared here with its reason; a
// count that is too high fails too, so the list never outlives the code.
var fixedInstants = map[string]struct {
	n   int
	why string
}{
	"patterns/cronguard/options.go":      {1, "a key-length probe: only the formatted length of the instant matters"},
	"patterns/cronguard/example_test.go": {3, "examples that show the trigger in their output; RunAt and Claim name it from the instant given, the MemStore keeps it whatever the date"},
	"patterns/cronguard/guard_test.go":   {2, "Trigger of an Every grid is arithmetic; RunAt names the trigger from the instant given and the MemStore keeps it whatever the date"},
	"lockx/fuzz_test.go":                 {1, "the seed of an encoding round trip"},
	"lockx/mysqllock/table.go":           {1, "an expiry on the second day of 1970 marks a row already expired: every clock is past it"},
	"lockx/memlock/rw_prop_test.go":      {2, "the start of a property test's fake clock, the only clock the backend reads there"},
	"patterns/stock/order_json_test.go":  {2, "an Order's deadline in a JSON round trip: encoding only, no clock reads it"},
}

// datePattern finds a calendar date, alone or in an RFC 3339 time.
var datePattern = regexp.MustCompile(`\b(1[89]|2[0-9])[0-9]{2}-[01][0-9]-[0-3][0-9]`)

// A fixed instant meeting a real clock is how a test passes only near the
// day it was written. The moved clock of make test catches those meeting a
// package's default clock; this check catches the others (a store's clock,
// time.Now in the test) before they are written.
func TestFixedInstantsAreDeclared(t *testing.T) {
	fset := token.NewFileSet()
	found := map[string]int{}
	eachGoFile(t, fset, func(g goFile) {
		ast.Inspect(g.f, func(n ast.Node) bool {
			var what string
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || len(n.Args) == 0 {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "time" {
					return true
				}
				lit, ok := n.Args[0].(*ast.BasicLit)
				switch {
				case !ok:
				case sel.Sel.Name == "Date":
					what = "time.Date(" + lit.Value + ", …)"
				case strings.HasPrefix(sel.Sel.Name, "Unix") && !isZero(lit):
					what = "time." + sel.Sel.Name + "(" + lit.Value + ", …)"
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && datePattern.MatchString(n.Value) && !strings.Contains(n.Value, "2006-01-02") {
					what = "the date in " + n.Value
				}
			}
			if what == "" {
				return true
			}
			found[g.rel]++
			if found[g.rel] > fixedInstants[g.rel].n {
				t.Errorf("%s: %s is a fixed instant: build it from now, inject the clock, or declare in fixedInstants why no clock meets it (docs/testing.md)",
					fset.Position(n.Pos()), what)
			}
			return true
		})
	})
	for rel, d := range fixedInstants {
		if found[rel] < d.n {
			t.Errorf("fixedInstants declares %d fixed instants in %s, which has %d: lower the count", d.n, rel, found[rel])
		}
	}
}

func isZero(lit *ast.BasicLit) bool {
	f, err := strconv.ParseFloat(lit.Value, 64)
	return err == nil && f == 0
}
