package eino

import (
	"sort"
	"strings"
)

// typeGlobs maps ripgrep's names of common file types (rg --type-list)
// to a glob of their names, for GrepRequest.FileType.
var typeGlobs = map[string]string{
	"c":          "*.{c,h}",
	"cpp":        "*.{C,cc,cpp,cxx,c++,h,hh,hpp,hxx,h++,inl}",
	"cs":         "*.cs",
	"css":        "*.{css,scss}",
	"csv":        "*.csv",
	"docker":     "{Dockerfile,*.dockerfile,Dockerfile.*}",
	"go":         "*.go",
	"html":       "*.{htm,html}",
	"java":       "*.java",
	"js":         "*.{js,jsx,mjs,cjs,vue}",
	"json":       "*.{json,jsonl}",
	"kotlin":     "*.{kt,kts}",
	"lua":        "*.lua",
	"make":       "{Makefile,makefile,GNUmakefile,*.mk,*.mak}",
	"markdown":   "*.{md,markdown,mdown,mkd}",
	"md":         "*.{md,markdown,mdown,mkd}",
	"php":        "*.{php,php3,php4,php5,phtml}",
	"proto":      "*.proto",
	"py":         "*.{py,pyi}",
	"python":     "*.{py,pyi}",
	"r":          "*.{R,r,Rmd,rmd}",
	"ruby":       "*.{rb,gemspec,rake}",
	"rust":       "*.rs",
	"scala":      "*.{scala,sbt}",
	"sh":         "*.{sh,bash,zsh,ksh}",
	"sql":        "*.sql",
	"swift":      "*.swift",
	"tex":        "*.{tex,ltx,sty,cls,bib}",
	"toml":       "*.toml",
	"ts":         "*.{ts,tsx,mts,cts}",
	"typescript": "*.{ts,tsx,mts,cts}",
	"txt":        "*.txt",
	"xml":        "*.{xml,xsd,xsl,xslt,svg}",
	"yaml":       "*.{yaml,yml}",
}

func knownTypes() string {
	names := make([]string, 0, len(typeGlobs))
	for n := range typeGlobs {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
