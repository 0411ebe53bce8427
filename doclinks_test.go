package sandbox_test

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/sandboxkit/sandbox"

// docPackage is one package of the module as go doc shows it: its exported
// API and the imports its files name.
type docPackage struct {
	path    string
	dir     string
	doc     *doc.Package
	imports map[string]string // name in the files -> import path
	types   map[string]*ast.TypeSpec
}

// loadDocPackages parses every package of the module (non-test files, all
// build constraints together: a GOOS-specific file is documentation too).
func loadDocPackages(t *testing.T) map[string]*docPackage {
	t.Helper()
	pkgs := map[string]*docPackage{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if n := d.Name(); p != "." && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
			return filepath.SkipDir
		}
		ents, err := filepath.Glob(filepath.Join(p, "*.go"))
		if err != nil {
			return err
		}
		var files []*ast.File
		for _, f := range ents {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			if ignored(af) {
				continue
			}
			files = append(files, af)
		}
		if len(files) == 0 {
			return nil
		}
		ip := modulePath
		if p != "." {
			ip += "/" + filepath.ToSlash(p)
		}
		dp := &docPackage{path: ip, dir: p, imports: map[string]string{}, types: map[string]*ast.TypeSpec{}}
		for _, f := range files {
			for _, imp := range f.Imports {
				ipath, _ := strconv.Unquote(imp.Path.Value)
				name := importName(ipath)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				dp.imports[name] = ipath
			}
			for _, decl := range f.Decls {
				if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
					for _, s := range g.Specs {
						ts := s.(*ast.TypeSpec)
						dp.types[ts.Name.Name] = ts
					}
				}
			}
		}
		// NewFromFiles wants one package; a directory's non-test files are one.
		dp.doc, err = doc.NewFromFiles(fset, files, ip)
		if err != nil {
			return err
		}
		pkgs[ip] = dp
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages: the walk is wrong", len(pkgs))
	}
	return pkgs
}

// ignored reports a file excluded from every build (//go:build ignore).
func ignored(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() >= f.Package {
			break
		}
		for _, c := range cg.List {
			if strings.HasPrefix(c.Text, "//go:build") && strings.Contains(c.Text, "ignore") {
				return true
			}
		}
	}
	return false
}

// importName is the package name an import path has by convention: its
// last element, skipping a major-version suffix.
func importName(ipath string) string {
	elems := strings.Split(ipath, "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && regexp.MustCompile(`^v[0-9]+$`).MatchString(name) {
		name = elems[len(elems)-2]
	}
	return strings.TrimPrefix(strings.TrimPrefix(name, "go-"), "go.")
}

// docText is one public doc comment: whose it is and its text.
type docText struct {
	where string
	text  string
}

// publicDocs returns the package doc and the doc comments of every
// exported name, method, struct field and interface method, as go doc
// shows them.
func publicDocs(dp *docPackage) []docText {
	var out []docText
	add := func(where, text string) {
		if strings.TrimSpace(text) != "" {
			out = append(out, docText{dp.path + ": " + where, text})
		}
	}
	add("package doc", dp.doc.Doc)
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			add(strings.Join(v.Names, ", "), v.Doc)
			for _, s := range v.Decl.Specs {
				if vs, ok := s.(*ast.ValueSpec); ok && vs.Doc != nil && len(vs.Names) > 0 && vs.Names[0].IsExported() {
					add(vs.Names[0].Name, vs.Doc.Text())
				}
			}
		}
	}
	values(dp.doc.Consts)
	values(dp.doc.Vars)
	for _, f := range dp.doc.Funcs {
		add(f.Name, f.Doc)
	}
	for _, typ := range dp.doc.Types {
		add(typ.Name, typ.Doc)
		values(typ.Consts)
		values(typ.Vars)
		for _, f := range typ.Funcs {
			add(f.Name, f.Doc)
		}
		for _, m := range typ.Methods {
			add(typ.Name+"."+m.Name, m.Doc)
		}
		var fields *ast.FieldList
		switch st := dp.types[typ.Name].Type.(type) {
		case *ast.StructType:
			fields = st.Fields
		case *ast.InterfaceType:
			fields = st.Methods
		}
		if fields != nil {
			for _, fld := range fields.List {
				for _, n := range fld.Names {
					if n.IsExported() {
						add(typ.Name+"."+n.Name, fld.Doc.Text()+"\n"+fld.Comment.Text())
					}
				}
			}
		}
	}
	return out
}

// hasSym reports whether dp documents name (recv == "") or the method or
// field name of the type recv.
func (dp *docPackage) hasSym(recv, name string) bool {
	if recv == "" {
		for _, vs := range [][]*doc.Value{dp.doc.Consts, dp.doc.Vars} {
			for _, v := range vs {
				if contains(v.Names, name) {
					return true
				}
			}
		}
		for _, f := range dp.doc.Funcs {
			if f.Name == name {
				return true
			}
		}
		for _, typ := range dp.doc.Types {
			if typ.Name == name {
				return true
			}
			for _, vs := range [][]*doc.Value{typ.Consts, typ.Vars} {
				for _, v := range vs {
					if contains(v.Names, name) {
						return true
					}
				}
			}
			for _, f := range typ.Funcs {
				if f.Name == name {
					return true
				}
			}
		}
		return false
	}
	for _, typ := range dp.doc.Types {
		if typ.Name != recv {
			continue
		}
		for _, m := range typ.Methods {
			if m.Name == name {
				return true
			}
		}
		switch st := dp.types[recv].Type.(type) {
		case *ast.StructType:
			return hasField(st.Fields, name)
		case *ast.InterfaceType:
			return hasField(st.Methods, name)
		}
	}
	return false
}

func hasField(fl *ast.FieldList, name string) bool {
	for _, f := range fl.List {
		for _, n := range f.Names {
			if n.Name == name {
				return true
			}
		}
		if len(f.Names) == 0 { // embedded: its name is its type's
			if id, ok := ast.Unparen(f.Type).(*ast.Ident); ok && id.Name == name {
				return true
			}
		}
	}
	return false
}

func contains(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// quotedRE matches a double-quoted literal on one line of a comment, such
// as "[REDACTED]": brackets there are text, not a link.
var quotedRE = regexp.MustCompile(`"[^"\n]*"`)

// docLinks returns every doc link in text as go doc would see it were
// every name a symbol: [Name], [Recv.Name], [pkg.Name], [pkg.Recv.Name]
// and [importpath.Name], with pkg as written. Quoted literals are left out.
func docLinks(text string) []*comment.DocLink {
	text = quotedRE.ReplaceAllString(text, `""`)
	p := &comment.Parser{
		LookupPackage: func(name string) (string, bool) { return name, token.IsIdentifier(name) },
		LookupSym:     func(recv, name string) bool { return true },
	}
	var links []*comment.DocLink
	var walk func([]comment.Text)
	walk = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case *comment.DocLink:
				links = append(links, t)
			case *comment.Link:
				walk(t.Text)
			case *comment.Italic, comment.Plain:
			}
		}
	}
	var blocks func([]comment.Block)
	blocks = func(bs []comment.Block) {
		for _, b := range bs {
			switch b := b.(type) {
			case *comment.Paragraph:
				walk(b.Text)
			case *comment.Heading:
				walk(b.Text)
			case *comment.List:
				for _, it := range b.Items {
					blocks(it.Content)
				}
			}
		}
	}
	blocks(p.Parse(text).Content)
	return links
}

// TestDocLinks checks that every doc link in the public documentation of
// every package of the module names something that exists: a symbol of the
// package itself, of a package of the module that the files import (or
// name by import path), or a standard library package (accepted as
// written). go doc and pkg.go.dev render a link that does not resolve as
// plain text, so a broken one is easy to miss.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	pkgs := loadDocPackages(t)
	var bad []string
	links := 0
	for _, dp := range pkgs {
		for _, d := range publicDocs(dp) {
			for _, l := range docLinks(d.text) {
				links++
				target := dp
				name := l.Name
				if l.Recv != "" {
					name = l.Recv + "." + l.Name
				}
				written := name
				if l.ImportPath != "" {
					written = l.ImportPath + "." + name
					ip, ok := dp.imports[l.ImportPath]
					switch {
					case l.ImportPath == dp.doc.Name:
						ip = dp.path
					case strings.Contains(l.ImportPath, "/") || strings.Contains(l.ImportPath, "."):
						ip = l.ImportPath // written as a full import path
					case !ok:
						if _, std := comment.DefaultLookupPackage(l.ImportPath); std {
							continue
						}
						bad = append(bad, d.where+": ["+written+"]: package "+l.ImportPath+" is not imported by "+dp.path)
						continue
					}
					if ip != modulePath && !strings.HasPrefix(ip, modulePath+"/") {
						if !strings.Contains(strings.Split(ip, "/")[0], ".") {
							continue // a standard library package
						}
						continue // another module's package: go doc resolves it from the import
					}
					if target = pkgs[ip]; target == nil {
						bad = append(bad, d.where+": ["+written+"]: no package "+ip)
						continue
					}
				}
				if l.Name == "" { // [pkg] alone
					continue
				}
				if !target.hasSym(l.Recv, l.Name) {
					bad = append(bad, d.where+": ["+written+"]: "+path.Base(target.path)+" has no exported "+name)
				}
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error("broken doc link: " + b)
	}
	if links < 20 {
		t.Fatalf("found only %d doc links: the walk is wrong", links)
	}
}

// seedRE matches the word seed (or seeds) in any case.
var seedRE = regexp.MustCompile(`(?i)\bseeds?\b`)

// TestPublicDocsNameNoSeed checks that no public comment (package docs and
// the doc comments of exported names, methods and fields, in non-test
// files) speaks of the project's seeds: that is internal history, which
// means nothing to a user; a comment says what a behaviour is and why.
func TestPublicDocsNameNoSeed(t *testing.T) {
	t.Parallel()
	pkgs := loadDocPackages(t)
	n := 0
	for _, dp := range pkgs {
		for _, d := range publicDocs(dp) {
			n++
			for _, line := range strings.Split(d.text, "\n") {
				if seedRE.MatchString(line) {
					t.Errorf("%s: names a seed: %q", d.where, strings.TrimSpace(line))
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("found only %d public doc comments: the walk is wrong", n)
	}
}
