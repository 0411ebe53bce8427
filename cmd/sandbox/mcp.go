package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/internal/telemetry"
	"github.com/sandboxkit/sandbox/run"
	"github.com/sandboxkit/sandbox/session"
	"go.opentelemetry.io/otel/attribute"
)

// Defaults of the MCP server.
const (
	// mcpLabel marks the sandboxes the MCP server creates.
	mcpLabel = "sandboxkit.mcp"
	// releaseTimeout bounds the destroy of a session's sandbox when the
	// MCP session ends.
	releaseTimeout = 30 * time.Second
	// defaultProgressInterval is how often a long execute reports progress.
	defaultProgressInterval = 2 * time.Second
	// serverVersion is reported to MCP clients.
	serverVersion = "0.1.0"
)

// mcpConfig configures the MCP server.
type mcpConfig struct {
	// AllowExecute adds execute and the run_* tools.
	AllowExecute bool
	// ReuseLabel, when set, is the session key of every MCP session: they
	// share the sandbox labelled with it, which outlives the server and is
	// reattached to by the next one.
	ReuseLabel string
	// Workspace is the workspace directory, absolute or relative to the
	// sandbox's home (session.DefaultWorkspace when empty).
	Workspace string
	// Template and Lease configure the sandboxes created.
	Template string
	Lease    time.Duration
	// NoNetwork, Network and Brokered are the network of the sandboxes
	// created (sandbox.CreateOptions' fields of those names); every
	// brokered value is redacted from every result as Secrets are, but
	// never set for commands.
	NoNetwork bool
	Network   *sandbox.NetworkPolicy
	Brokered  []sandbox.BrokeredSecret
	// Secrets maps an environment variable name to its value: set for
	// commands and redacted from every result.
	Secrets map[string]string
	// ExecuteTimeout is execute's default timeout (fsbackend's when zero).
	ExecuteTimeout time.Duration
	// RunBudget is the longest lifetime run_start gives a run
	// (defaultRunBudget when zero): the model's budget_seconds cannot
	// exceed it.
	RunBudget time.Duration
	// ProgressInterval is how often a long execute reports progress
	// (defaultProgressInterval when zero).
	ProgressInterval time.Duration
	// Logger receives the server's events; nil discards them.
	Logger *slog.Logger
}

// mcpServer serves the sandbox tools to MCP clients, one sandbox per MCP
// session.
type mcpServer struct {
	cfg    mcpConfig
	mgr    *session.Manager
	server *mcp.Server
	redact func(string) string
	// secrets redacts run_logs pages as the whole output would be.
	secrets *secretSet

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*mcpSession
	closed   bool
	wg       sync.WaitGroup // watchers of ended MCP sessions
}

// mcpSession is the sandbox side of one MCP session.
type mcpSession struct {
	key string

	mu   sync.Mutex // serialises acquisition
	sess *session.Session
	fsb  *fsbackend.FilesystemBackend
}

// newMCPServer returns a server over client. Close it to release every
// session's sandbox.
func newMCPServer(client *sandbox.Client, cfg mcpConfig) (*mcpServer, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = defaultProgressInterval
	}
	opts := session.Options{
		Create: sandbox.CreateOptions{
			Template:        cfg.Template,
			Labels:          map[string]string{mcpLabel: "1"},
			Timeout:         cfg.Lease,
			NoNetwork:       cfg.NoNetwork,
			Network:         cfg.Network,
			BrokeredSecrets: cfg.Brokered,
		},
		Workspace: cfg.Workspace,
		Logger:    cfg.Logger,
	}
	if cfg.ReuseLabel != "" {
		// A reused sandbox must outlive the server: nothing reaps it, and
		// Close does not end the manager (which would destroy it).
		opts.IdleTimeout = -1
		opts.ReapInterval = -1
	}
	s := &mcpServer{
		cfg:      cfg,
		mgr:      session.NewManager(client, opts),
		redact:   newRedactor(redactionSet(cfg)),
		secrets:  newSecretSet(redactionSet(cfg)),
		sessions: map[*mcp.ServerSession]*mcpSession{},
	}
	s.server = mcp.NewServer(&mcp.Implementation{Name: "sandbox", Title: "sandboxkit sandbox", Version: serverVersion}, &mcp.ServerOptions{
		Instructions: "Tools over one sandbox per session: file tools jailed to the workspace" +
			map[bool]string{true: ", and execute and run_* to run shell commands in it.", false: "."}[cfg.AllowExecute],
		Logger: cfg.Logger,
	})
	s.server.AddReceivingMiddleware(boundToolErrors)
	s.addTools()
	return s, nil
}

// redactionSet is every value the server redacts: the Secrets and the
// brokered secrets' values (the latter keyed apart: they are never set
// for commands).
func redactionSet(cfg mcpConfig) map[string]string {
	m := maps.Clone(cfg.Secrets)
	if m == nil {
		m = map[string]string{}
	}
	for _, b := range cfg.Brokered {
		m["broker-secret "+b.Env] = b.Value
	}
	return m
}

// brokeredValues returns the values of bs: a file may come to hold one
// (an upstream that echoes its request headers), and the file tools must
// not cut one in two, or the redaction would miss the part kept.
func brokeredValues(bs []sandbox.BrokeredSecret) []string {
	var vs []string
	for _, b := range bs {
		vs = append(vs, b.Value)
	}
	return vs
}

// maxToolError bounds the text of a tool's error result.
const maxToolError = 4 << 10

// boundToolErrors cuts the text of every tool error result to
// maxToolError bytes, with a note: the go-sdk's checks of a tool's input
// quote the input, which may be as large as a request (a 200 KB argument
// came back whole in its error).
func boundToolErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok && len(tc.Text) > maxToolError {
					tc.Text = truncateUTF8(tc.Text, maxToolError) + fmt.Sprintf(" ... [error cut: %d bytes in all]", len(tc.Text))
				}
			}
		}
		return res, err
	}
}

// truncateUTF8 returns the longest prefix of s of at most n bytes that
// does not end inside a UTF-8 sequence.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// newRedactor returns a function that replaces every secret value with
// [REDACTED], longest first so that a secret containing another is
// replaced whole.
func newRedactor(secrets map[string]string) func(string) string {
	vals := secretValues(secrets)
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	if len(vals) == 0 {
		return func(s string) string { return s }
	}
	pairs := make([]string, 0, 2*len(vals))
	for _, v := range vals {
		pairs = append(pairs, v, "[REDACTED]")
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}

// minSecretLine is the shortest line of a multi-line secret redacted on
// its own.
const minSecretLine = 6

// secretValues returns the values to redact: each secret, and each line of
// a multi-line one (of minSecretLine bytes or more), since the line tools
// (read_file numbers lines, grep returns single lines) never show such a
// secret whole.
func secretValues(secrets map[string]string) []string {
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
	return vals
}

// redactValue replaces secrets in every string reachable from v, a pointer
// to a tool's output.
func redactValue(v reflect.Value, redact func(string) string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			redactValue(v.Elem(), redact)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				redactValue(v.Field(i), redact)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			redactValue(v.Index(i), redact)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(redact(v.String()))
		}
	}
}

// Close ends every MCP session, releases their sandboxes (unless reused)
// and waits for the watchers.
func (s *mcpServer) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	// Every session the server holds, those that never called a tool too.
	var live []*mcp.ServerSession
	for ss := range s.server.Sessions() {
		live = append(live, ss)
	}
	for _, ss := range live {
		ss.Close()
	}
	s.wg.Wait()
	if s.cfg.ReuseLabel != "" {
		return nil
	}
	return s.mgr.Close(ctx)
}

// acquire returns the session and file backend of the MCP session of req,
// creating its sandbox on first use.
func (s *mcpServer) acquire(ctx context.Context, ss *mcp.ServerSession) (*session.Session, *fsbackend.FilesystemBackend, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, sandbox.Errorf(sandbox.FailedPrecondition, "the server is shutting down")
	}
	ms := s.sessions[ss]
	if ms == nil {
		ms = &mcpSession{key: s.cfg.ReuseLabel}
		if ms.key == "" {
			ms.key = "mcp-" + randomHex(8)
		}
		s.sessions[ss] = ms
		s.wg.Add(1)
		go s.watch(ss, ms)
	}
	s.mu.Unlock()

	ms.mu.Lock()
	defer ms.mu.Unlock()
	sess, err := s.mgr.Acquire(ctx, ms.key)
	if err != nil {
		return nil, nil, err
	}
	if ms.sess != sess || ms.fsb == nil {
		if ms.fsb != nil {
			ms.fsb.Close()
		}
		fsb, err := fsbackend.New(sess.Sandbox(), fsbackend.Options{
			BaseDir:        sess.Workspace(),
			AllowExecute:   s.cfg.AllowExecute,
			SecretEnv:      s.cfg.Secrets,
			Secrets:        brokeredValues(s.cfg.Brokered),
			ExecuteTimeout: s.cfg.ExecuteTimeout,
			Logger:         s.cfg.Logger,
		})
		if err != nil {
			return nil, nil, err
		}
		ms.sess, ms.fsb = sess, fsb
	}
	return ms.sess, ms.fsb, nil
}

// watch releases the sandbox of an MCP session once the session ends.
func (s *mcpServer) watch(ss *mcp.ServerSession, ms *mcpSession) {
	defer s.wg.Done()
	_ = ss.Wait()
	s.mu.Lock()
	delete(s.sessions, ss)
	s.mu.Unlock()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.fsb != nil {
		ms.fsb.Close()
	}
	if ms.sess == nil || s.cfg.ReuseLabel != "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := s.mgr.Release(ctx, ms.sess); err != nil {
		s.cfg.Logger.Error("mcp: could not release the session's sandbox", "id", ms.sess.ID(), "err", s.redact(err.Error()))
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// toolError is the error a tool returns: the go-sdk packs it into an
// isError result; its text is redacted.
func (s *mcpServer) toolError(err error) error {
	if be, ok := errors.AsType[*backend.Error](err); ok {
		return errors.New(s.redact(fmt.Sprintf("%s: %s", be.Code, be.Message)))
	}
	return errors.New(s.redact(fmt.Sprintf("%s: %v", sandbox.CodeOf(err), err)))
}

// mcpScope is the instrumentation scope of the MCP server's spans.
const mcpScope = "github.com/sandboxkit/sandbox/cmd/sandbox/mcp"

// tool adds a typed tool whose handler gets the MCP session's sandbox;
// outputs and errors are redacted, and errors become isError results.
func addTool[In, Out any](s *mcpServer, t *mcp.Tool, h func(ctx context.Context, req *mcp.CallToolRequest, sess *session.Session, fsb *fsbackend.FilesystemBackend, in In) (Out, error)) {
	mcp.AddTool(s.server, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		// One span per tool call, named as OpenTelemetry's MCP conventions
		// name it; the session's calls are its children. The arguments are
		// never recorded.
		ctx, span := telemetry.Start(ctx, telemetry.Tracer(s.mgr.Client().TracerProvider(), mcpScope), "tools/call "+t.Name,
			attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", t.Name), telemetry.Tool.String(t.Name))
		var cause error // the failure before toolError flattens it: its code goes on the span
		defer func() { telemetry.End(span, cause) }()
		var zero Out
		sess, fsb, err := s.acquire(ctx, req.Session)
		if err != nil {
			cause = err
			return nil, zero, s.toolError(err)
		}
		if span.IsRecording() {
			span.SetAttributes(telemetry.KeyHash.String(telemetry.Hash(sess.Key())), telemetry.SandboxID.String(sess.ID()))
		}
		var out Out
		err = sess.Do(ctx, func(ctx context.Context, _ *sandbox.Sandbox) error {
			var herr error
			out, herr = h(ctx, req, sess, fsb, in)
			return herr
		})
		if err != nil {
			cause = err
			return nil, zero, s.toolError(err)
		}
		redactValue(reflect.ValueOf(&out), s.redact)
		return nil, out, nil
	})
}

// Tool inputs and outputs. The jsonschema tags describe them to the model.
type (
	lsIn struct {
		Path string `json:"path,omitempty" jsonschema:"directory relative to the workspace; empty for the workspace root"`
	}
	fileEntry struct {
		Path    string `json:"path" jsonschema:"path relative to the workspace"`
		IsDir   bool   `json:"is_dir"`
		Size    int64  `json:"size"`
		ModTime string `json:"mod_time,omitempty" jsonschema:"modification time, RFC 3339"`
	}
	filesOut struct {
		Files []fileEntry `json:"files"`
	}
	readIn struct {
		Path   string `json:"path" jsonschema:"file relative to the workspace"`
		Offset int    `json:"offset,omitempty" jsonschema:"0-based index of the first line to return"`
		Limit  int    `json:"limit,omitempty" jsonschema:"number of lines to return (default 2000)"`
	}
	readOut struct {
		Content    string `json:"content" jsonschema:"the lines, numbered"`
		TotalLines int    `json:"total_lines"`
		Truncated  bool   `json:"truncated,omitempty" jsonschema:"the lines asked for exceed the read size limit: content ends at the last whole line that fit; read on with a later offset"`
	}
	writeIn struct {
		Path    string `json:"path" jsonschema:"file relative to the workspace; parents are created"`
		Content string `json:"content" jsonschema:"the file's new text"`
	}
	writeOut struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	editIn struct {
		Path       string `json:"path" jsonschema:"file relative to the workspace"`
		OldString  string `json:"old_string" jsonschema:"exact text to replace; must occur once unless replace_all"`
		NewString  string `json:"new_string" jsonschema:"replacement text"`
		ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence"`
	}
	editOut struct {
		Path        string `json:"path"`
		Occurrences int    `json:"occurrences"`
	}
	globIn struct {
		Pattern string `json:"pattern" jsonschema:"glob such as *.py (any depth) or src/**/*.go"`
		Path    string `json:"path,omitempty" jsonschema:"directory to search; empty for the workspace root"`
	}
	grepIn struct {
		Pattern    string `json:"pattern" jsonschema:"text to find: literal, or a regular expression with regex"`
		Regex      bool   `json:"regex,omitempty" jsonschema:"pattern is a regular expression in RE2 syntax (Go regexp: no backreferences or lookaround)"`
		IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match letters regardless of case"`
		Before     int    `json:"before,omitempty" jsonschema:"lines of context to return before each match (as grep -B)"`
		After      int    `json:"after,omitempty" jsonschema:"lines of context to return after each match (as grep -A)"`
		Path       string `json:"path,omitempty" jsonschema:"directory or file to search; empty for the workspace root"`
		Glob       string `json:"glob,omitempty" jsonschema:"only search files matching this glob"`
		MaxCount   int    `json:"max_count,omitempty" jsonschema:"return at most this many matches (context lines do not count)"`
	}
	grepMatch struct {
		Path    string `json:"path"`
		Line    int    `json:"line"`
		Text    string `json:"text"`
		Context bool   `json:"context,omitempty" jsonschema:"a context line near a match (before/after), not a match"`
	}
	grepOut struct {
		Matches   []grepMatch `json:"matches"`
		Truncated bool        `json:"truncated,omitempty"`
		Skipped   []string    `json:"skipped,omitempty" jsonschema:"files not searched: too large, hard links, or not readable (permission denied or an I/O error; a directory ends in /)"`
	}
	executeIn struct {
		Command        string  `json:"command" jsonschema:"shell command line, run in the workspace"`
		TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"end the command after this many seconds (default and most: the server's limit, given in the tool's description; more is lowered to it)"`
	}
	executeOut struct {
		Output    string `json:"output" jsonschema:"stdout, then stderr"`
		ExitCode  int    `json:"exit_code" jsonschema:"-1 when a signal or the timeout ended the command"`
		Signal    string `json:"signal,omitempty" jsonschema:"the signal that ended the command (SIGKILL when out of memory, for example), where the provider can tell"`
		TimedOut  bool   `json:"timed_out,omitempty"`
		Truncated bool   `json:"truncated,omitempty"`
		// The timeout applied, and whether timeout_seconds asked for more
		// than the server allows.
		TimeoutSeconds float64 `json:"timeout_seconds" jsonschema:"the timeout applied to the command, in seconds"`
		TimeoutLowered bool    `json:"timeout_lowered,omitempty" jsonschema:"timeout_seconds was above the server's limit and was lowered to it"`
	}
	runStartIn struct {
		ID            string `json:"id" jsonschema:"run id you choose; starting the same id with the same command again returns the same run"`
		Command       string `json:"command" jsonschema:"shell command line, run in the workspace in the background"`
		BudgetSeconds int    `json:"budget_seconds,omitempty" jsonschema:"the run's lifetime in seconds (default 1800, most: the server's limit, given in the tool's description; more is lowered to it)"`
	}
	runIDIn struct {
		ID string `json:"id" jsonschema:"the run id given to run_start"`
	}
	runStatusOut struct {
		ID             string `json:"id"`
		State          string `json:"state" jsonschema:"pending, running, exited or lost"`
		ExitCode       *int   `json:"exit_code,omitempty" jsonschema:"set once the run is exited or lost"`
		Killed         bool   `json:"killed,omitempty"`
		BudgetExceeded bool   `json:"budget_exceeded,omitempty"`
		// Set by run_start: the budget applied, and whether budget_seconds
		// asked for more than the server's limit.
		BudgetSeconds int64 `json:"budget_seconds,omitempty" jsonschema:"run_start: the run's lifetime applied, in seconds"`
		BudgetLowered bool  `json:"budget_lowered,omitempty" jsonschema:"run_start: budget_seconds was above the server's limit and was lowered to it"`
	}
	runLogsIn struct {
		ID       string `json:"id" jsonschema:"the run id given to run_start"`
		Offset   int64  `json:"offset,omitempty" jsonschema:"byte offset to read from: pass the previous call's next"`
		MaxBytes int    `json:"max_bytes,omitempty" jsonschema:"read at most this many bytes (default 65536)"`
	}
	runLogsOut struct {
		Output string `json:"output"`
		Next   int64  `json:"next" jsonschema:"offset for the next call"`
		Done   bool   `json:"done" jsonschema:"the run ended and output reaches the end"`
	}
)

func toEntries(fs []backend.FileInfo) filesOut {
	out := filesOut{Files: make([]fileEntry, 0, len(fs))}
	for _, f := range fs {
		e := fileEntry{Path: f.Path, IsDir: f.IsDir, Size: f.Size}
		if !f.ModTime.IsZero() {
			e.ModTime = f.ModTime.UTC().Format(time.RFC3339)
		}
		out.Files = append(out.Files, e)
	}
	return out
}

// resultErr returns a result's *backend.Error as an error, or nil.
func resultErr(e *backend.Error) error {
	if e == nil {
		return nil
	}
	return e
}

func (s *mcpServer) addTools() {
	addTool(s, &mcp.Tool{Name: "ls", Description: "List the entries of a directory of the workspace (not recursive)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ *session.Session, fsb *fsbackend.FilesystemBackend, in lsIn) (filesOut, error) {
			r, err := fsb.Ls(ctx, &backend.LsRequest{Path: in.Path})
			if err != nil {
				return filesOut{}, err
			}
			return toEntries(r.Files), resultErr(r.Error)
		})
	addTool(s, &mcp.Tool{Name: "read_file", Description: "Read a window of a text file's lines, numbered. Use offset and limit for large files."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ *session.Session, fsb *fsbackend.FilesystemBackend, in readIn) (readOut, error) {
			if in.Offset < 0 || in.Limit < 0 {
				return readOut{}, backend.Errorf(backend.CodeInvalidPath, in.Path, "offset %d and limit %d must not be negative", in.Offset, in.Limit)
			}
			r, err := fsb.Read(ctx, &backend.ReadRequest{Path: in.Path, Offset: in.Offset, Limit: in.Limit})
			if err != nil {
				return readOut{}, err
			}
			return readOut{Content: r.Content, TotalLines: r.TotalLines, Truncated: r.Truncated}, resultErr(r.Error)
		})
	addTool(s, &mcp.Tool{Name: "write_file", Description: "Create or replace a text file in the workspace, creating parent directories."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ *session.Session, fsb *fsbackend.FilesystemBackend, in writeIn) (writeOut, error) {
			r, err := fsb.Write(ctx, &backend.WriteRequest{Path: in.Path, Content: in.Content})
			if err != nil {
				return writeOut{}, err
			}
			return writeOut{Path: r.Path, Bytes: r.Bytes}, resultErr(r.Error)
		})
	addTool(s, &mcp.Tool{Name: "edit_file", Description: "Replace old_string with new_string in a text file; old_string must occur exactly once unless replace_all."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ *session.Session, fsb *fsbackend.FilesystemBackend, in editIn) (editOut, error) {
			r, err := fsb.Edit(ctx, &backend.EditRequest{Path: in.Path, OldString: in.OldString, NewString: in.NewString, ReplaceAll: in.ReplaceAll})
			if err != nil {
				return editOut{}, err
			}
			return editOut{Path: r.Path, Occurrences: r.Occurrences}, resultErr(r.Error)
		})
	addTool(s, &mcp.Tool{Name: "glob", Description: "Find files and directories of the workspace whose paths match a glob."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ *session.Session, fsb *fsbackend.FilesystemBackend, in globIn) (filesOut, error) {
			r, err := fsb.Glob(ctx, &backend.GlobRequest{Pattern: in.Pattern, Path: in.Path})
			if err != nil {
				return filesOut{}, err
			}
			return toEntries(r.Files), resultErr(r.Error)
		})
	addTool(s, &mcp.Tool{Name: "grep", Description: "Find the lines of text files of the workspace that contain a literal string, or match a regular expression (regex), optionally ignoring case, with lines of context before and after each match."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ *session.Session, fsb *fsbackend.FilesystemBackend, in grepIn) (grepOut, error) {
			if in.MaxCount < 0 {
				return grepOut{}, backend.Errorf(backend.CodeInvalidPath, in.Path, "max_count %d must not be negative", in.MaxCount)
			}
			r, err := fsb.Grep(ctx, &backend.GrepRequest{Pattern: in.Pattern, Regex: in.Regex, IgnoreCase: in.IgnoreCase,
				Before: in.Before, After: in.After, Path: in.Path, Glob: in.Glob, MaxCount: in.MaxCount})
			if err != nil {
				return grepOut{}, err
			}
			out := grepOut{Matches: make([]grepMatch, 0, len(r.Matches)), Truncated: r.Truncated, Skipped: r.Skipped}
			for _, m := range r.Matches {
				out.Matches = append(out.Matches, grepMatch{Path: m.Path, Line: m.Line, Text: m.Text, Context: m.Context})
			}
			return out, resultErr(r.Error)
		})
	s.addMetricsTool()
	if !s.cfg.AllowExecute {
		return
	}
	addTool(s, &mcp.Tool{Name: "execute", Description: fmt.Sprintf("Run a shell command in the workspace and return its output and exit code. Long commands report progress. "+
		"The command ends after timeout_seconds, at most and by default %d seconds (the server's limit; a larger value is lowered to it).", int64(math.Ceil(s.executeCeiling().Seconds())))},
		s.execute)
	addTool(s, &mcp.Tool{Name: "run_start", Description: fmt.Sprintf("Start a shell command in the background under an id of your choice; it survives this call. Poll it with run_status and run_logs. "+
		"The run ends after budget_seconds, by default %d and at most %d seconds (the server's limit; a larger value is lowered to it).", int64(s.runBudget(0).Seconds()), int64(s.runCeiling().Seconds()))},
		func(ctx context.Context, _ *mcp.CallToolRequest, sess *session.Session, _ *fsbackend.FilesystemBackend, in runStartIn) (runStatusOut, error) {
			if in.BudgetSeconds < 0 {
				return runStatusOut{}, sandbox.Errorf(sandbox.InvalidArgument, "budget_seconds %d is out of range: want 0 (the default, %v) to %d; values above the server's limit are lowered to it",
					in.BudgetSeconds, s.runBudget(0), int64(s.runCeiling().Seconds()))
			}
			budget := s.runBudget(int64(in.BudgetSeconds))
			if strings.TrimSpace(in.Command) == "" {
				return runStatusOut{}, sandbox.Errorf(sandbox.InvalidArgument, "command is empty")
			}
			r, err := run.Start(ctx, sess.Sandbox(), run.Request{
				ID: in.ID, Command: []string{"sh", "-c", in.Command}, Dir: sess.Workspace(),
				Env: s.cfg.Secrets, Budget: budget,
			})
			if err != nil {
				return runStatusOut{}, err
			}
			out, err := runStatus(ctx, r)
			if err != nil {
				return runStatusOut{}, err
			}
			out.BudgetSeconds = int64(budget / time.Second)
			out.BudgetLowered = int64(in.BudgetSeconds) > int64(s.runCeiling()/time.Second)
			return out, nil
		})
	addTool(s, &mcp.Tool{Name: "run_status", Description: "Report a background run's state and, once it ended, its exit code."},
		func(ctx context.Context, _ *mcp.CallToolRequest, sess *session.Session, _ *fsbackend.FilesystemBackend, in runIDIn) (runStatusOut, error) {
			r, err := run.Open(ctx, sess.Sandbox(), in.ID)
			if err != nil {
				return runStatusOut{}, err
			}
			return runStatus(ctx, r)
		})
	addTool(s, &mcp.Tool{Name: "run_logs", Description: "Read a background run's combined output from a byte offset; pass the returned next to continue."},
		func(ctx context.Context, _ *mcp.CallToolRequest, sess *session.Session, _ *fsbackend.FilesystemBackend, in runLogsIn) (runLogsOut, error) {
			if in.Offset < 0 || in.MaxBytes < 0 {
				return runLogsOut{}, sandbox.Errorf(sandbox.InvalidArgument, "offset %d and max_bytes %d must not be negative", in.Offset, in.MaxBytes)
			}
			r, err := run.Open(ctx, sess.Sandbox(), in.ID)
			if err != nil {
				return runLogsOut{}, err
			}
			return s.redactedLogs(ctx, r.ReadLogs, in.Offset, in.MaxBytes)
		})
}

func runStatus(ctx context.Context, r *run.Run) (runStatusOut, error) {
	st, err := r.Status(ctx)
	if err != nil {
		return runStatusOut{}, err
	}
	j := toRunJSON(r.ID(), st)
	return runStatusOut{ID: j.ID, State: j.State, ExitCode: j.ExitCode, Killed: j.Killed, BudgetExceeded: j.BudgetExceeded}, nil
}

// execute runs the command through fsbackend and, when the client asked
// for progress, reports it every ProgressInterval until the command ends.
func (s *mcpServer) execute(ctx context.Context, req *mcp.CallToolRequest, _ *session.Session, fsb *fsbackend.FilesystemBackend, in executeIn) (executeOut, error) {
	timeout, clamped, err := s.executeTimeout(in.TimeoutSeconds)
	if err != nil {
		return executeOut{}, err
	}
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			t := time.NewTicker(s.cfg.ProgressInterval)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				case <-t.C:
					el := time.Since(start).Truncate(time.Second)
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: token, Progress: el.Seconds(), Message: fmt.Sprintf("running for %v", el),
					})
				}
			}
		}()
		defer wg.Wait()
		defer close(done)
	}
	r, err := fsb.Execute(ctx, &backend.ExecuteRequest{Command: in.Command, Timeout: timeout})
	if err != nil {
		return executeOut{}, err
	}
	if r.Error != nil {
		return executeOut{}, r.Error
	}
	return executeOut{
		Output: r.Output, ExitCode: r.ExitCode, Signal: r.Signal, TimedOut: r.TimedOut, Truncated: r.Truncated,
		TimeoutSeconds: timeout.Seconds(), TimeoutLowered: clamped,
	}, nil
}

// maxSeconds is the largest count of seconds a time.Duration holds.
const maxSeconds = int64(math.MaxInt64 / time.Second)

// formatNumber shows a JSON number as given when short, else in
// exponent form (bounded).
func formatNumber(f float64) string {
	if math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// executeCeiling is the longest timeout execute applies: --execute-timeout,
// else fsbackend's default.
func (s *mcpServer) executeCeiling() time.Duration {
	if s.cfg.ExecuteTimeout > 0 {
		return s.cfg.ExecuteTimeout
	}
	return fsbackend.DefaultExecuteTimeout
}

// defaultRunBudget is the default of --run-budget; maxRunBudget is the
// longest --run-budget accepted (a run that long outlives any watcher).
const (
	defaultRunBudget = time.Hour
	maxRunBudget     = 30 * 24 * time.Hour
)

// runCeiling is the longest lifetime run_start gives a run: --run-budget,
// else defaultRunBudget.
func (s *mcpServer) runCeiling() time.Duration {
	if s.cfg.RunBudget > 0 {
		return min(s.cfg.RunBudget, maxRunBudget)
	}
	return defaultRunBudget
}

// runBudget returns the budget run_start applies for budget_seconds sec
// (not negative): run.DefaultBudget, within the ceiling, when zero; sec up
// to the ceiling; the ceiling above it. The comparison is in seconds, so
// no value overflows a duration.
func (s *mcpServer) runBudget(sec int64) time.Duration {
	ceiling := s.runCeiling()
	if sec == 0 {
		return min(run.DefaultBudget, ceiling)
	}
	if sec >= int64(ceiling/time.Second) {
		return ceiling
	}
	return time.Duration(sec) * time.Second
}

// executeTimeout returns the timeout execute applies for timeout_seconds:
// the ceiling when zero, the value asked for up to the ceiling, the
// ceiling (clamped true) above it. A negative value, or one no duration
// can hold, is an InvalidArgument error naming the argument.
func (s *mcpServer) executeTimeout(sec float64) (d time.Duration, clamped bool, err error) {
	ceiling := s.executeCeiling()
	if !(sec >= 0 && sec <= float64(maxSeconds)) {
		return 0, false, sandbox.Errorf(sandbox.InvalidArgument, "timeout_seconds %s is out of range: want 0 (the server's limit, %v) to %d; values above the limit are lowered to it",
			formatNumber(sec), ceiling, maxSeconds)
	}
	if sec == 0 {
		return ceiling, false, nil
	}
	if sec > ceiling.Seconds() {
		return ceiling, true, nil // compared as floats: no conversion to overflow
	}
	return max(time.Duration(sec*float64(time.Second)), time.Nanosecond), false, nil
}

func (a *app) mcpCmd() *cobra.Command {
	var (
		httpAddr  string
		cfg       mcpConfig
		secretEnv []string
		tokenFile string
		httpOpts  httpOptions
		nf        netFlags
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve sandbox tools to a model over MCP (stdio, or streamable HTTP with --http)",
		Long: `mcp is a Model Context Protocol server. Its tools, ls, read_file, write_file,
edit_file, glob and grep (and with --allow-execute: execute, run_start,
run_status, run_logs), work on one sandbox per MCP session, created on the
session's first tool call and destroyed when it ends. With --reuse-label NAME
every session uses the sandbox labelled NAME, kept when the server stops and
found again by the next one. File tools are jailed to the workspace. Values of
the variables named by --secret-env are given to commands and redacted from
every result. The sandboxes' network is set by --allow-host, --deny-host and
--no-network, and --broker-secret gives commands a placeholder for a key the
provider puts on their requests to its hosts (the value is redacted too).
execute's timeout is --execute-timeout unless the model asks
for less (timeout_seconds above it is lowered to it, and the result says so);
likewise a run_start run lives at most --run-budget (budget_seconds above it is
lowered to it, and the result says so).

Over HTTP (--http) every request must carry a bearer token, sent by the
client as the header "Authorization: Bearer <token>"; a request without it,
or with another, gets 401 before any tool runs. The token is generated at
start and printed on stderr, unless given through --token-file (one token a
line, each with its own session cap; the file must not be readable by other
users) or the variable SANDBOX_MCP_TOKEN. A token is never taken from the
command line, where other users could read it. The server listens on
loopback only, unless a token is given that way. Each token may hold
--max-sessions sessions at once (more get 429), and a session that sends
nothing for --idle-timeout ends and its sandbox is released.`,
		Example: `  sandbox mcp                                     # stdio, file tools only
  sandbox mcp --allow-execute --secret-env OPENAI_API_KEY
  API_KEY=... sandbox mcp --allow-execute --allow-host pypi.org --allow-host '*.pythonhosted.org' \
      --allow-host api.example.com --broker-secret API_KEY=api.example.com
  sandbox mcp --http 127.0.0.1:8931 --allow-execute   # prints the token to send
  SANDBOX_MCP_TOKEN=$(cat ~/.config/sandbox-mcp-token) sandbox mcp --http 127.0.0.1:8931
  sandbox --url e2b:// mcp --reuse-label my-project --workspace /home/user/project`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Secrets = map[string]string{}
			for _, name := range secretEnv {
				v := a.getenv(name)
				if v == "" {
					return usagef("--secret-env %s: the variable is unset or empty", name)
				}
				cfg.Secrets[name] = v
			}
			if cfg.Lease < 0 {
				return usagef("--lease %v: must not be negative", cfg.Lease)
			}
			var netOpts sandbox.CreateOptions
			if err := nf.options(a, &netOpts, nil, cfg.Secrets, false); err != nil {
				return err
			}
			cfg.NoNetwork, cfg.Network, cfg.Brokered = netOpts.NoNetwork, netOpts.Network, netOpts.BrokeredSecrets
			if cfg.RunBudget < time.Second || cfg.RunBudget > maxRunBudget {
				return usagef("--run-budget %v: want 1s to %v", cfg.RunBudget, maxRunBudget)
			}
			if cfg.ExecuteTimeout <= 0 {
				return usagef("--execute-timeout %v: must be positive", cfg.ExecuteTimeout)
			}
			if httpAddr == "" {
				for _, name := range []string{"token-file", "max-sessions", "idle-timeout"} {
					if cmd.Flags().Changed(name) {
						return usagef("--%s applies only with --http", name)
					}
				}
			} else {
				if httpOpts.MaxSessions < 1 {
					return usagef("--max-sessions %d: want at least 1", httpOpts.MaxSessions)
				}
				if httpOpts.IdleTimeout <= 0 {
					return usagef("--idle-timeout %v: must be positive", httpOpts.IdleTimeout)
				}
				toks, err := loadTokens(tokenFile, a.getenv)
				if err != nil {
					return err
				}
				httpOpts.Tokens = toks
				// Before the client opens anything: a bad address wastes nothing.
				if err := checkListenAddr(httpAddr, len(toks) > 0); err != nil {
					return err
				}
			}
			cfg.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			ctx := cmd.Context()
			client, err := a.client(ctx)
			if err != nil {
				return err
			}
			defer client.Close()
			srv, err := newMCPServer(client, cfg)
			if err != nil {
				return err
			}
			defer func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
				defer cancel()
				srv.Close(cctx)
			}()
			if httpAddr == "" {
				return srv.serveIO(ctx, a.stdin, a.stdout)
			}
			return srv.serveHTTP(ctx, httpAddr, httpOpts, a.stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&httpAddr, "http", "", "serve streamable HTTP on this address (loopback, such as 127.0.0.1:8931, unless a token is given) instead of stdio")
	f.StringVar(&tokenFile, "token-file", "", "with --http: file holding the bearer token(s) clients must send, one a line (default: $SANDBOX_MCP_TOKEN, else a token generated and printed)")
	f.IntVar(&httpOpts.MaxSessions, "max-sessions", defaultMaxSessions, "with --http: most sessions open at once per token")
	f.DurationVar(&httpOpts.IdleTimeout, "idle-timeout", defaultHTTPIdle, "with --http: end a session, releasing its sandbox, after this long without a request")
	f.BoolVar(&cfg.AllowExecute, "allow-execute", false, "add the execute and run_* tools")
	f.StringVar(&cfg.ReuseLabel, "reuse-label", "", "share one sandbox labelled with this value across sessions and restarts, and keep it")
	f.StringVar(&cfg.Workspace, "workspace", "", "workspace directory, absolute or relative to the sandbox's home (default workspace)")
	f.StringArrayVar(&secretEnv, "secret-env", nil, "name of an environment variable to pass to commands and redact from results (repeatable)")
	f.StringVar(&cfg.Template, "template", "", "template of the sandboxes created")
	f.DurationVar(&cfg.Lease, "lease", 0, "lease of the sandboxes created, extended by each tool call (0: the provider's default)")
	f.DurationVar(&cfg.RunBudget, "run-budget", defaultRunBudget, "longest lifetime of a run_start run: the model's budget_seconds cannot exceed it (its default is the smaller of 30m and this)")
	f.DurationVar(&cfg.ExecuteTimeout, "execute-timeout", fsbackend.DefaultExecuteTimeout, "default and longest timeout of execute: the model's timeout_seconds cannot exceed it")
	nf.add(f)
	return cmd
}

// serveIO serves one MCP session over r and w (stdin and stdout).
func (s *mcpServer) serveIO(ctx context.Context, r io.Reader, w io.Writer) error {
	var t mcp.Transport
	if r == os.Stdin && w == os.Stdout {
		t = &mcp.StdioTransport{}
	} else {
		t = &mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{w}}
	}
	err := s.server.Run(ctx, t)
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) || ctx.Err() != nil) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveHTTP serves streamable HTTP on addr until ctx ends, announcing
// the address on logw, and the token too when it was generated (no token
// in o). An address beyond loopback needs a given token.
func (s *mcpServer) serveHTTP(ctx context.Context, addr string, o httpOptions, logw io.Writer) error {
	if err := checkListenAddr(addr, len(o.Tokens) > 0); err != nil {
		return err
	}
	generated := len(o.Tokens) == 0
	if generated {
		o.Tokens = []string{generateToken()}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mcp: listen %s: %w", addr, err)
	}
	fmt.Fprintf(logw, "sandbox mcp: serving streamable HTTP on http://%s/mcp\n", ln.Addr())
	if generated {
		fmt.Fprintf(logw, "sandbox mcp: clients must send \"Authorization: Bearer %s\"\n", o.Tokens[0])
	} else {
		fmt.Fprintf(logw, "sandbox mcp: clients must send \"Authorization: Bearer <token>\" with a token given to the server\n")
	}
	if host, _, _ := net.SplitHostPort(addr); !isLoopbackHost(host) {
		fmt.Fprintf(logw, "sandbox mcp: warning: %s is beyond loopback and the traffic is not encrypted; put TLS in front of it\n", addr)
	}
	return s.serveListener(ctx, ln, o)
}

// serveListener serves streamable HTTP on ln (at /mcp and /) until ctx
// ends, then shuts the HTTP server down. Every request must carry one of
// o.Tokens (see httpGate); o.Tokens must not be empty.
func (s *mcpServer) serveListener(ctx context.Context, ln net.Listener, o httpOptions) error {
	if len(o.Tokens) == 0 {
		ln.Close()
		return fmt.Errorf("mcp: serving HTTP needs a token")
	}
	gate := newHTTPGate(s.server, o)
	// A session whose client sends nothing for the idle limit ends, and
	// its sandbox is released (see watch).
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server },
		&mcp.StreamableHTTPOptions{SessionTimeout: gate.idle})
	// Cross-origin browser requests are refused before the token is
	// looked at; the go-sdk handler refuses a Host that is not loopback
	// on a loopback listener (DNS rebinding) and caps request bodies.
	// Connections that send no request are closed: no header within 10 s,
	// or kept alive idle for a minute.
	hs := &http.Server{Handler: http.NewCrossOriginProtection().Handler(gate.handler(h)), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("mcp: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	<-errc
	return nil
}
