package sandboxgenkit

import (
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"
)

// redacted replaces a secret value in every output.
const redacted = "[REDACTED]"

// minSecretLine is the shortest line of a multi-line secret redacted on
// its own: read_file numbers lines and grep returns single lines, so such
// a secret is never shown whole.
const minSecretLine = 6

// redactor replaces secret values with [REDACTED], longest first so that a
// secret holding another is replaced whole.
type redactor struct {
	vals []string
	r    *strings.Replacer
}

func newRedactor(secrets []string) *redactor {
	var vals []string
	for _, v := range secrets {
		if v == "" {
			continue
		}
		vals = append(vals, v)
		if !strings.Contains(v, "\n") {
			continue
		}
		for _, line := range strings.Split(v, "\n") {
			if line = strings.TrimSuffix(line, "\r"); len(line) >= minSecretLine {
				vals = append(vals, line)
			}
		}
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	rd := &redactor{vals: vals}
	if len(vals) > 0 {
		pairs := make([]string, 0, 2*len(vals))
		for _, v := range vals {
			pairs = append(pairs, v, redacted)
		}
		rd.r = strings.NewReplacer(pairs...)
	}
	return rd
}

// text returns s with every secret value replaced.
func (rd *redactor) text(s string) string {
	if rd.r == nil {
		return s
	}
	return rd.r.Replace(s)
}

// cut returns the longest prefix of s of at most n bytes that does not
// end inside a UTF-8 sequence, without a trailing start of a secret value
// (a cut that splits a secret would otherwise show its first part).
func (rd *redactor) cut(s string, n int) string {
	return rd.trimPartial(cutUTF8(s, n))
}

// trimPartial drops the end of s when it is the start of a secret value:
// what remains of a secret that a cap cut in two. The longest such end,
// over every secret, is dropped (one secret's first character must not
// hide another's longer start).
func (rd *redactor) trimPartial(s string) string {
	longest := 0
	for _, v := range rd.vals {
		for k := min(len(v)-1, len(s)); k > longest; k-- {
			if strings.HasSuffix(s, v[:k]) {
				longest = k
				break
			}
		}
	}
	return s[:len(s)-longest]
}

// value replaces secrets in every string reachable from v, a pointer to
// a tool's output.
func (rd *redactor) value(v reflect.Value) {
	if rd.r == nil {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			rd.value(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				rd.value(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			rd.value(v.Index(i))
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(rd.text(v.String()))
		}
	}
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does
// not end inside a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
