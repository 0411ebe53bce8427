package memory

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// The interpreter supports only descriptors 0, 1 and 2 and has no
// noclobber option. Scripts that open a file on another descriptor
// ("exec 3< file", "exec 4<> file", "cmd <&3", "cat >&4", "exec 3<&-") or
// set -C are rewritten before they run: "exec" with such redirections
// becomes the internal command fdCmd, which keeps a descriptor table for
// the script, and a duplication from such a descriptor becomes a
// redirection from or to "/dev/fd/N", which the open handler serves from
// that table.

// fdCmd is the internal command "exec N<file ..." is rewritten to.
const fdCmd = "\x00exec-fd"

// fdEntry is an open descriptor above 2: the file's node and the offset
// reads and writes through it start at.
type fdEntry struct {
	n        *node
	off      int
	readable bool
	writable bool
}

// shellState is what one script's descriptors and options hold.
type shellState struct {
	mu        sync.Mutex
	fds       map[int]*fdEntry
	noclobber bool
}

func word(s string) *syntax.Word {
	return &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{Value: s}}}
}

// highFD returns the descriptor number of a redirection's N when it is
// above 2.
func highFD(rd *syntax.Redirect) (int, bool) {
	if rd.N == nil {
		return 0, false
	}
	n, err := strconv.Atoi(rd.N.Value)
	return n, err == nil && n > 2
}

// rewriteFDs rewrites file's redirections onto descriptors above 2 as the
// package comment above says.
func rewriteFDs(file *syntax.File) {
	syntax.Walk(file, func(node syntax.Node) bool {
		st, ok := node.(*syntax.Stmt)
		if !ok {
			return true
		}
		// Duplications from or to a descriptor above 2 read or write its
		// table entry.
		for _, rd := range st.Redirs {
			if _, ok := highFD(rd); ok || rd.Word == nil || (rd.Op != syntax.DplIn && rd.Op != syntax.DplOut) {
				continue
			}
			lit := rd.Word.Lit()
			n, err := strconv.Atoi(lit)
			if err != nil || n <= 2 {
				continue
			}
			if rd.Op == syntax.DplIn {
				rd.Op = syntax.RdrIn
			} else {
				rd.Op = syntax.AppOut
			}
			rd.Word = word("/dev/fd/" + lit)
		}
		call, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(call.Args) != 1 || call.Args[0].Lit() != "exec" {
			// A command's own "N>&-" or "N<&-" closes a descriptor above 2
			// for that command only; commands here inherit no descriptor
			// above 2, so there is nothing to close.
			kept := st.Redirs[:0]
			for _, rd := range st.Redirs {
				if _, ok := highFD(rd); ok && (rd.Op == syntax.DplIn || rd.Op == syntax.DplOut) && rd.Word != nil && rd.Word.Lit() == "-" {
					continue
				}
				kept = append(kept, rd)
			}
			st.Redirs = kept
			return true
		}
		var keep []*syntax.Redirect
		var args []*syntax.Word
		for _, rd := range st.Redirs {
			n, ok := highFD(rd)
			if !ok {
				keep = append(keep, rd)
				continue
			}
			op := rd.Op.String()
			w := rd.Word
			if w == nil {
				w = word("")
			}
			args = append(args, word(strconv.Itoa(n)), word(op), w)
		}
		if len(args) > 0 {
			call.Args = append([]*syntax.Word{word(fdCmd)}, args...)
			st.Redirs = keep
		}
		return true
	})
}

// fdExec runs fdCmd: triples of descriptor, operator and word.
func (s *shellState) fdExec(ctx context.Context, v *vfs, args []string) error {
	hc := interp.HandlerCtx(ctx)
	for i := 0; i+2 < len(args); i += 3 {
		n, _ := strconv.Atoi(args[i])
		op, w := args[i+1], args[i+2]
		var e *fdEntry
		switch op {
		case "<&", ">&":
			if w == "-" {
				s.mu.Lock()
				delete(s.fds, n)
				s.mu.Unlock()
				continue
			}
			m, err := strconv.Atoi(w)
			s.mu.Lock()
			src, ok := s.fds[m]
			s.mu.Unlock()
			if err != nil || !ok {
				fmt.Fprintf(hc.Stderr, "sh: %s: bad file descriptor\n", w)
				return interp.NewExitStatus(2)
			}
			c := *src
			e = &c
		case "<":
			data, err := v.readFileNode(w)
			if err != nil {
				fmt.Fprintf(hc.Stderr, "sh: cannot open %s: %s\n", w, errText(err))
				return interp.NewExitStatus(2)
			}
			e = &fdEntry{n: data, readable: true}
		case ">", ">>", "<>", ">|":
			flag := os.O_WRONLY | os.O_CREATE
			switch op {
			case ">":
				flag |= os.O_TRUNC
				if s.clobberGuard() {
					flag |= os.O_EXCL
				}
			case ">|":
				flag |= os.O_TRUNC
			case ">>":
				flag |= os.O_APPEND
			case "<>":
				flag = os.O_RDWR | os.O_CREATE
			}
			nd, err := v.openWrite(w, flag, 0o666)
			if err != nil {
				fmt.Fprintf(hc.Stderr, "sh: cannot create %s: %s\n", w, errText(err))
				return interp.NewExitStatus(2)
			}
			e = &fdEntry{n: nd, writable: true, readable: op == "<>"}
			if op == ">>" {
				e.off = v.size(nd)
			}
		default:
			fmt.Fprintf(hc.Stderr, "sh: %d%s: redirection not supported by the memory provider\n", n, op)
			return interp.NewExitStatus(2)
		}
		s.mu.Lock()
		if s.fds == nil {
			s.fds = map[int]*fdEntry{}
		}
		s.fds[n] = e
		s.mu.Unlock()
	}
	return nil
}

func (s *shellState) clobberGuard() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noclobber
}

// openFD serves "/dev/fd/N" for a descriptor above 2.
func (s *shellState) openFD(v *vfs, n int, write bool) (io.ReadWriteCloser, error) {
	s.mu.Lock()
	e, ok := s.fds[n]
	s.mu.Unlock()
	p := "/dev/fd/" + strconv.Itoa(n)
	if !ok {
		return nil, pe("open", p, syscall.EBADF)
	}
	if write {
		if !e.writable {
			return nil, pe("open", p, syscall.EBADF)
		}
		return &memWriter{v: v, n: e.n, off: &e.off}, nil
	}
	if !e.readable {
		return nil, pe("open", p, syscall.EBADF)
	}
	data := v.dataFrom(e.n, e.off)
	return hostCopy(data)
}

// setOptions strips -C/+C (-o/+o noclobber) from a "set" call, keeping
// noclobber in the script's state; ok is false when nothing is left to
// run.
func (s *shellState) setOptions(args []string) ([]string, bool) {
	out := []string{args[0]}
	changed := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" {
			out = append(out, args[i:]...)
			break
		}
		if (a == "-o" || a == "+o") && i+1 < len(args) && args[i+1] == "noclobber" {
			s.mu.Lock()
			s.noclobber = a == "-o"
			s.mu.Unlock()
			i++
			changed = true
			continue
		}
		if len(a) > 1 && (a[0] == '-' || a[0] == '+') && a[1] != 'o' {
			kept := a[:1]
			for _, ch := range a[1:] {
				if ch == 'C' {
					s.mu.Lock()
					s.noclobber = a[0] == '-'
					s.mu.Unlock()
					changed = true
					continue
				}
				kept += string(ch)
			}
			if len(kept) > 1 {
				out = append(out, kept)
			}
			continue
		}
		out = append(out, a)
	}
	if changed && len(out) == 1 {
		return nil, false
	}
	return out, true
}
