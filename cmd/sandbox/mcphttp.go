package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of MCP over streamable HTTP.
const (
	// tokenEnv names the environment variable that may hold the bearer
	// token of MCP over HTTP.
	tokenEnv = "SANDBOX_MCP_TOKEN"
	// defaultMaxSessions caps the MCP sessions open at once per token.
	defaultMaxSessions = 8
	// defaultHTTPIdle ends a streamable HTTP session, and releases its
	// sandbox, after this long without a request from its client.
	defaultHTTPIdle = 10 * time.Minute
	// minTokenLen is the shortest token accepted from a file or the
	// environment.
	minTokenLen = 16
	// maxTokenFile caps the size of a token file.
	maxTokenFile = 64 << 10
	// sessionIDHeader is the streamable HTTP transport's session header.
	sessionIDHeader = "Mcp-Session-Id"
)

// httpOptions configures MCP over streamable HTTP.
type httpOptions struct {
	// Tokens are the bearer tokens accepted; each has its own session cap.
	Tokens []string
	// MaxSessions caps the sessions open at once per token
	// (defaultMaxSessions when zero).
	MaxSessions int
	// IdleTimeout ends a session, releasing its sandbox, after this long
	// without a request (defaultHTTPIdle when zero).
	IdleTimeout time.Duration
}

// generateToken returns a new random bearer token (256 bits, base64url).
func generateToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// loadTokens returns the tokens given through --token-file (one a line;
// blank lines and lines starting with # are skipped) or through
// $SANDBOX_MCP_TOKEN, or none when neither is set. A token is never taken
// from the command line, where every local user can read it (ps). The
// errors never show a token.
func loadTokens(file string, getenv func(string) string) ([]string, error) {
	env := strings.TrimSpace(getenv(tokenEnv))
	if file != "" && env != "" {
		return nil, usagef("--token-file and $%s are both set: give the token one way", tokenEnv)
	}
	if env != "" {
		if err := checkToken(env); err != nil {
			return nil, usagef("$%s: %v", tokenEnv, err)
		}
		return []string{env}, nil
	}
	if file == "" {
		return nil, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, usagef("--token-file: %v", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && runtime.GOOS != "windows" && st.Mode().Perm()&0o066 != 0 {
		return nil, usagef("--token-file %s: mode %v lets other users read or change the token; chmod 600 it", file, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, usagef("--token-file: %v", err)
	}
	if len(b) > maxTokenFile {
		return nil, usagef("--token-file %s: larger than %d bytes", file, maxTokenFile)
	}
	var toks []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := checkToken(line); err != nil {
			return nil, usagef("--token-file %s, line %d: %v", file, i+1, err)
		}
		toks = append(toks, line)
	}
	if len(toks) == 0 {
		return nil, usagef("--token-file %s: no token in the file", file)
	}
	return toks, nil
}

// checkToken accepts a token of at least minTokenLen characters of the
// bearer token alphabet (RFC 6750: letters, digits, -._~+/ and = padding).
func checkToken(tok string) error {
	if len(tok) < minTokenLen {
		return fmt.Errorf("the token has %d characters, want at least %d", len(tok), minTokenLen)
	}
	for i, c := range tok {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~+/=", c)
		if !ok {
			return fmt.Errorf("the token has a character outside letters, digits and -._~+/= at position %d", i+1)
		}
	}
	return nil
}

// isLoopbackHost reports whether host (of HOST:PORT) is a loopback name or
// address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkListenAddr refuses an address that is not HOST:PORT, and an address
// beyond loopback when the token was generated rather than given (the
// operator must hand it to remote clients on purpose).
func checkListenAddr(addr string, tokenGiven bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--http %q: want HOST:PORT such as 127.0.0.1:8931: %v", addr, err)
	}
	if !isLoopbackHost(host) && !tokenGiven {
		return usagef("--http %q: the server runs code; listen on a loopback address such as 127.0.0.1, or give the clients' token through --token-file or $%s to listen beyond loopback", addr, tokenEnv)
	}
	return nil
}

// httpGate authenticates the requests of MCP over HTTP and caps the
// sessions each token holds.
type httpGate struct {
	server *mcp.Server
	hashes [][sha256.Size]byte
	max    int
	idle   time.Duration

	mu      sync.Mutex
	owner   map[*mcp.ServerSession]int // open session -> token index
	pending []int                      // per token: sessions being created
}

func newHTTPGate(server *mcp.Server, o httpOptions) *httpGate {
	g := &httpGate{server: server, max: o.MaxSessions, idle: o.IdleTimeout, owner: map[*mcp.ServerSession]int{}, pending: make([]int, len(o.Tokens))}
	if g.max <= 0 {
		g.max = defaultMaxSessions
	}
	if g.idle <= 0 {
		g.idle = defaultHTTPIdle
	}
	for _, t := range o.Tokens {
		g.hashes = append(g.hashes, sha256.Sum256([]byte(t)))
	}
	return g
}

// tokenIndex returns the index of the token the request carries, or -1.
// The comparison is in constant time (of hashes, so the tokens' lengths
// do not show either) and visits every token.
func (g *httpGate) tokenIndex(r *http.Request) int {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return -1
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found := -1
	for i := range g.hashes {
		if subtle.ConstantTimeCompare(h[:], g.hashes[i][:]) == 1 {
			found = i
		}
	}
	return found
}

// handler wraps the MCP handler: a request without a valid token gets 401
// before anything else runs; a request that would open a session past its
// token's cap gets 429. Each session is bound to its token (the go-sdk
// refuses a request for it carrying another).
func (g *httpGate) handler(next http.Handler) http.Handler {
	bound := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		i := g.tokenIndex(r)
		if i < 0 {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: fmt.Sprintf("token-%d", i)}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := g.tokenIndex(r)
		if i < 0 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox mcp"`)
			http.Error(w, "unauthorized: send the server's token as \"Authorization: Bearer <token>\"", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get(sessionIDHeader) != "" {
			bound.ServeHTTP(w, r)
			return
		}
		// A POST without a session id opens a session.
		if n, ok := g.reserve(i); !ok {
			w.Header().Set("Retry-After", fmt.Sprint(int(g.idle.Seconds())))
			http.Error(w, fmt.Sprintf("too many sessions: this token holds %d, the most allowed (--max-sessions); end one (HTTP DELETE with its %s) or let one sit idle for %v", n, sessionIDHeader, g.idle), http.StatusTooManyRequests)
			return
		}
		sw := &settleWriter{ResponseWriter: w, settle: func() { g.settle(i, w) }}
		defer sw.done()
		bound.ServeHTTP(sw, r)
	})
}

// settleWriter settles a session's reservation when the response's header
// goes out (the client may go on before the handler returns), or when the
// handler returns without writing.
type settleWriter struct {
	http.ResponseWriter
	once   sync.Once
	settle func()
}

func (w *settleWriter) done() { w.once.Do(w.settle) }

func (w *settleWriter) WriteHeader(code int) {
	w.done()
	w.ResponseWriter.WriteHeader(code)
}

func (w *settleWriter) Write(b []byte) (int, error) {
	w.done()
	return w.ResponseWriter.Write(b)
}

func (w *settleWriter) Flush() {
	w.done()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *settleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// reserve counts a session being opened for token i, unless the token
// already holds its cap (then it returns the count and false). The count
// is of reservations not yet settled and of sessions settled that have not
// ended: a session leaves the go-sdk's list only when it ends (DELETE,
// idle close, the server closing it), and settle records only sessions it
// found in that list, so absence from it is a definite end.
func (g *httpGate) reserve(i int) (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	live := map[*mcp.ServerSession]bool{}
	for ss := range g.server.Sessions() {
		live[ss] = true
	}
	n := g.pending[i]
	for ss, owner := range g.owner {
		switch {
		case !live[ss]:
			delete(g.owner, ss) // ended
		case owner == i:
			n++
		}
	}
	if n >= g.max {
		return n, false
	}
	g.pending[i]++
	return n, true
}

// settle turns the reservation of token i into the session the request
// opened, if it opened one that is still open; otherwise it releases the
// reservation.
func (g *httpGate) settle(i int, w http.ResponseWriter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending[i]--
	id := w.Header().Get(sessionIDHeader)
	if id == "" {
		return
	}
	for ss := range g.server.Sessions() {
		if ss.ID() == id {
			g.owner[ss] = i
			return
		}
	}
}
