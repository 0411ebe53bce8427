// Package snapname keeps a snapshot's name and labels in the name a
// provider stores, for providers whose snapshots have a name and nothing
// else (E2B's and Daytona's). The stored name is
//
//	<slug>-<random>--<data>
//
// where slug is the caller's name lower-cased with every character other
// than a-z, 0-9 and "_" turned into "-" (runs of "-" collapsed), random is
// 12 hex digits that make every snapshot's name unique, and data is the
// caller's name and labels as JSON in lower-case base32hex without
// padding: only a-z0-9, "-" and "_", which both providers accept.
package snapname

import (
	"encoding/base32"
	"encoding/json"
	"fmt"
	"strings"
)

// MaxData is the longest encoded name-and-labels part accepted, to stay
// well inside the providers' name limits.
const MaxData = 400

var enc = base32.HexEncoding.WithPadding(base32.NoPadding)

type payload struct {
	Name   string            `json:"n,omitempty"`
	Labels map[string]string `json:"l,omitempty"`
}

// Encode returns the stored name for a snapshot called name with labels,
// made unique by random (hex digits). It fails when name and labels are
// too long to keep.
func Encode(name string, labels map[string]string, random string) (string, error) {
	slug := Slug(name)
	b, err := json.Marshal(payload{Name: name, Labels: labels})
	if err != nil {
		return "", err
	}
	data := strings.ToLower(enc.EncodeToString(b))
	if len(data) > MaxData {
		return "", fmt.Errorf("the name and labels take %d characters once encoded, more than the %d a snapshot name can keep", len(data), MaxData)
	}
	return slug + "-" + random + "--" + data, nil
}

// Slug is name lower-cased, characters other than a-z, 0-9 and "_"
// turned into "-", runs of "-" collapsed, at most 40 characters, and
// "snapshot" when nothing is left.
func Slug(name string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(name) {
		if b.Len() >= 40 {
			break
		}
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
		if !ok {
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		dash = false
		b.WriteRune(c)
	}
	s := strings.Trim(b.String(), "-_")
	if s == "" {
		return "snapshot"
	}
	return s
}

// Decode returns the caller's name and labels kept in stored. ok is false
// for a name Encode did not make (a snapshot made by other means): name
// is then stored itself, and labels nil.
func Decode(stored string) (name string, labels map[string]string, ok bool) {
	_, data, found := strings.Cut(stored, "--")
	if !found {
		return stored, nil, false
	}
	b, err := enc.DecodeString(strings.ToUpper(data))
	if err != nil {
		return stored, nil, false
	}
	var p payload
	if json.Unmarshal(b, &p) != nil {
		return stored, nil, false
	}
	return p.Name, p.Labels, true
}
