package main

import (
	"bytes"
	"context"

	"github.com/sandboxkit/sandbox/run"
)

// secretSet finds secret values in windows of a longer text, so that a
// page of it can be redacted as the whole text would be: a value the page
// boundary cuts in two is withheld, never shown in part.
type secretSet struct {
	vals   [][]byte
	maxLen int
}

func newSecretSet(secrets map[string]string) *secretSet {
	s := &secretSet{}
	for _, v := range secretValues(secrets) {
		s.vals = append(s.vals, []byte(v))
		s.maxLen = max(s.maxLen, len(v))
	}
	return s
}

// intervals returns the byte ranges [a, b) of buf covered by an occurrence
// of a value (overlapping occurrences included), sorted and merged, ranges
// that touch merged too.
func (s *secretSet) intervals(buf []byte) [][2]int {
	var ivs [][2]int
	for _, v := range s.vals {
		for at := 0; ; {
			i := bytes.Index(buf[at:], v)
			if i < 0 {
				break
			}
			ivs = append(ivs, [2]int{at + i, at + i + len(v)})
			at += i + 1
		}
	}
	if len(ivs) == 0 {
		return nil
	}
	// Insertion sort by start: few occurrences in a page.
	for i := 1; i < len(ivs); i++ {
		for j := i; j > 0 && ivs[j][0] < ivs[j-1][0]; j-- {
			ivs[j], ivs[j-1] = ivs[j-1], ivs[j]
		}
	}
	merged := ivs[:1]
	for _, iv := range ivs[1:] {
		last := &merged[len(merged)-1]
		if iv[0] <= last[1] {
			last[1] = max(last[1], iv[1])
			continue
		}
		merged = append(merged, iv)
	}
	return merged
}

// openTail returns the smallest index i >= from such that buf[i:] is a
// non-empty proper prefix of a value (bytes that may yet become a secret
// when more text follows), or len(buf).
func (s *secretSet) openTail(buf []byte, from int) int {
	for i := max(from, len(buf)-s.maxLen+1, 0); i < len(buf); i++ {
		for _, v := range s.vals {
			if len(buf)-i < len(v) && bytes.HasPrefix(v, buf[i:]) {
				return i
			}
		}
	}
	return len(buf)
}

// redactedLogs reads a page of a run's output from offset, of about
// maxBytes, redacted as the whole output would be. It reads the bytes
// around the page too (up to the longest secret's length on each side),
// so that a secret the page's start or end cuts is recognised: a page
// never ends inside a secret (it ends after it, the secret shown as
// [REDACTED] once), a page starting inside one withholds the rest of it,
// and while the run goes on, a tail that may be the start of a secret
// still being written is left for the next call. Lines are kept whole
// as run.ReadLogs keeps them, unless a line is longer than maxBytes.
//
// read is run.Run.ReadLogs (a function, for the tests).
func (s *mcpServer) redactedLogs(ctx context.Context, read func(ctx context.Context, offset int64, max int) (run.Chunk, error), offset int64, maxBytes int) (runLogsOut, error) {
	if maxBytes <= 0 {
		maxBytes = run.DefaultLogBytes
	}
	maxBytes = min(maxBytes, run.MaxLogBytes)
	if s.secrets.maxLen == 0 {
		ch, err := read(ctx, offset, maxBytes)
		if err != nil {
			return runLogsOut{}, err
		}
		return runLogsOut{Output: string(ch.Data), Next: ch.Next, Done: ch.EOF}, nil
	}
	margin := s.secrets.maxLen - 1
	ws := max(0, offset-int64(margin))
	rel := int(offset - ws)
	ch, err := read(ctx, ws, rel+maxBytes+margin)
	if err != nil {
		return runLogsOut{}, err
	}
	buf, eof := ch.Data, ch.EOF
	if len(buf) <= rel && !eof {
		// run.ReadLogs cut the read back to a line end inside the margin:
		// the line from offset is longer than the read, or not yet ended.
		// Read the rest of the margin (it holds no line end, so it comes
		// whole) and then the page alone, as without secrets, so that a
		// long line is paged through rather than read back to the margin
		// forever.
		if len(buf) < rel {
			m, err := read(ctx, ws+int64(len(buf)), rel-len(buf))
			if err != nil {
				return runLogsOut{}, err
			}
			if len(buf)+len(m.Data) < rel {
				return runLogsOut{Next: offset, Done: m.EOF}, nil
			}
			buf = append(buf[:len(buf):len(buf)], m.Data[:rel-len(buf)]...)
		}
		pg, err := read(ctx, offset, maxBytes)
		if err != nil {
			return runLogsOut{}, err
		}
		buf, eof = append(buf[:rel:rel], pg.Data...), pg.EOF
	}
	if len(buf) <= rel {
		return runLogsOut{Next: max(offset, ch.Next), Done: eof}, nil
	}
	// When buf ends with what may be the start of a secret, read on to
	// learn whether it is: the read above may have stopped at a line end
	// (or at its size) with more output after it. A few reads at most;
	// what stays unknown (the run has not written it yet) is withheld.
	// A tail that begins before the page counts too: the page would then
	// lie inside a secret being written.
	for tries := 0; !eof && tries < 4 && s.secrets.openTail(buf, 0) < len(buf); tries++ {
		more, err := read(ctx, ws+int64(len(buf)), 2*s.secrets.maxLen)
		if err != nil {
			return runLogsOut{}, err
		}
		buf, eof = append(buf, more.Data...), more.EOF
		if len(more.Data) == 0 {
			break
		}
	}
	end := min(rel+maxBytes, len(buf))
	if end < len(buf) {
		// Cut here rather than where run.ReadLogs did: keep whole lines.
		if i := bytes.LastIndexByte(buf[rel:end], '\n'); i >= 0 {
			end = rel + i + 1
		}
	}
	if !eof {
		// What follows buf is unknown: its tail may begin a secret.
		end = max(rel, min(end, s.secrets.openTail(buf, 0)))
	}
	ivs := s.secrets.intervals(buf)
	for _, iv := range ivs {
		if iv[0] < end && iv[1] > end {
			end = iv[1] // never end inside a secret
		}
	}
	var out []byte
	i := rel
	for _, iv := range ivs {
		if iv[1] <= rel || iv[0] >= end {
			continue
		}
		if iv[0] > i {
			out = append(out, buf[i:iv[0]]...)
		}
		if iv[0] >= rel {
			out = append(out, "[REDACTED]"...)
		} // else the secret began before the page: withheld, shown by the page that holds its start
		i = iv[1]
	}
	if i < end {
		out = append(out, buf[i:end]...)
	}
	return runLogsOut{Output: string(out), Next: ws + int64(end), Done: eof && end == len(buf)}, nil
}
