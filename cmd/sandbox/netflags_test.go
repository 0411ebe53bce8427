package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

const cliBrokered = "sk-cli-brokered-9f8e7d6c5b4a"

// invokeWithEnv runs the tool with env as the tool's environment.
func invokeWithEnv(t *testing.T, url string, env map[string]string, args ...string) cliRun {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(nil, &out, &errb)
	a.getenv = func(k string) string { return env[k] }
	return invokeApp(t, a, url, args...)
}

// create --allow-host/--deny-host/--broker-secret set the policy and the
// brokered secret: Info reports them, env in the sandbox holds the
// placeholder, and no output of the tool holds the value.
func TestCLIBrokeredSecret(t *testing.T) {
	t.Parallel()
	url := memoryURL(t)
	t.Cleanup(func() { destroyAll(t, url) })
	env := map[string]string{"API_KEY": cliBrokered, "TOK": "tok-value-0001"}
	r := mustOK(t, invokeWithEnv(t, url, env, "--json", "create",
		"--allow-host", "pypi.org", "--allow-host", "api.example.com", "--allow-host", "*.example.org", "--deny-host", "10.0.0.0/8",
		"--broker-secret", "API_KEY=api.example.com",
		"--broker-secret", "TOK=a.example.org,b.example.org:X-Api-Key"), "create")
	if strings.Contains(r.stdout+r.stderr, "sk-cli") {
		t.Fatalf("create output shows the value: %q %q", r.stdout, r.stderr)
	}
	var j infoJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("create --json: %v: %s", err, r.stdout)
	}
	if j.Network == nil || j.Network.Mode != "allow-list" || strings.Join(j.Network.Allow, ",") != "*.example.org,api.example.com,pypi.org" {
		t.Fatalf("network: %+v", j.Network)
	}
	if len(j.BrokeredSecrets) != 2 || j.BrokeredSecrets[0].Header != "Authorization" || j.BrokeredSecrets[0].Env != "API_KEY" ||
		strings.Join(j.BrokeredSecrets[1].Hosts, ",") != "a.example.org,b.example.org" || j.BrokeredSecrets[1].Header != "X-Api-Key" {
		t.Fatalf("brokered secrets: %+v", j.BrokeredSecrets)
	}
	// What the provider recorded, seen by another client.
	ctx := context.Background()
	c, err := sandbox.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sb, err := c.Attach(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Info().BrokeredSecrets; len(got) != 2 || got[0].Placeholder != j.BrokeredSecrets[0].Placeholder {
		t.Fatalf("recorded: %+v", got)
	}
	r = mustOK(t, invokeWithEnv(t, url, nil, "exec", j.ID, "--", "env"), "exec env")
	if !strings.Contains(r.stdout, "API_KEY="+j.BrokeredSecrets[0].Placeholder+"\n") || !strings.Contains(r.stdout, "TOK=SBX_BROKERED_TOK_") ||
		strings.Contains(r.stdout, "sk-cli") || strings.Contains(r.stdout, "tok-value") {
		t.Fatalf("env in the sandbox: %q", r.stdout)
	}
	r = mustOK(t, invokeWithEnv(t, url, nil, "info", j.ID), "info")
	if !strings.Contains(r.stdout, "brokered secret:  Authorization to api.example.com\n") || !strings.Contains(r.stdout, "network:") {
		t.Fatalf("info: %q", r.stdout)
	}
}

// Bad flags fail naming the input, before any sandbox is made, and never
// show the value.
func TestCLIBrokeredSecretErrors(t *testing.T) {
	t.Parallel()
	url := memoryURL(t)
	t.Cleanup(func() { destroyAll(t, url) })
	env := map[string]string{"API_KEY": cliBrokered}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--broker-secret", "MISSING=api.example.com"}, "--broker-secret MISSING: MISSING is unset or empty"},
		{[]string{"--broker-secret", "api.example.com"}, "want NAME=HOST"},
		{[]string{"--broker-secret", "API_KEY=api.example.com,"}, "an empty host"},
		{[]string{"--broker-secret", "API_KEY=a.example.com", "--broker-secret", "API_KEY=b.example.com"}, "given twice"},
		{[]string{"--broker-secret", "API_KEY=api.example.com", "--secret-env", "API_KEY"}, "given by --secret-env too"},
		{[]string{"--no-network", "--allow-host", "pypi.org"}, "--no-network: cannot be combined"},
		{[]string{"--allow-host", "pypi.org", "--broker-secret", "API_KEY=api.example.com"}, "host api.example.com is not let through"},
		{[]string{"--broker-secret", "API_KEY=api.example.com:Host"}, "Header Host is owned by the transport"},
		{[]string{"--broker-secret", "API_KEY=api.example.com:X-Key:token %d"}, "the verb %d"},
		{[]string{"--allow-host", "not a host"}, "network allow entry"},
	} {
		r := invokeWithEnv(t, url, env, append([]string{"create"}, tc.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
		if strings.Contains(r.stdout+r.stderr, "sk-cli") {
			t.Errorf("%v: the value shows: %q", tc.args, r.stderr)
		}
	}
	r := mustOK(t, invokeWithEnv(t, url, nil, "ls", "--json"), "ls")
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("a refused create left sandboxes: %s", r.stdout)
	}
	// --no-network alone still works.
	r = mustOK(t, invokeWithEnv(t, url, nil, "--json", "create", "--no-network"), "create --no-network")
	if !strings.Contains(r.stdout, `"mode": "deny-all"`) {
		t.Fatalf("create --no-network: %s", r.stdout)
	}
}

// The default header and format, a header alone, and a format with a
// colon in it.
func TestBrokerSecretFlagParsing(t *testing.T) {
	t.Parallel()
	a := newApp(nil, &bytes.Buffer{}, &bytes.Buffer{})
	a.getenv = func(string) string { return "v" }
	n := netFlags{broker: []string{"A=x.example.com", "B=y.example.com:X-Key", "C=z.example.com:Authorization:Token t=%s; scheme:b"}}
	var opts sandbox.CreateOptions
	if err := n.options(a, &opts, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	got := opts.BrokeredSecrets
	if len(got) != 3 || got[0].Header != "Authorization" || got[0].Format != "Bearer %s" ||
		got[1].Header != "X-Key" || got[1].Format != "%s" || got[2].Format != "Token t=%s; scheme:b" || got[2].Env != "C" {
		t.Fatalf("%+v", got)
	}
}

// The MCP server's sandboxes get the policy and the brokered secret, and
// the value is in its redaction set without being set for commands.
func TestMCPBrokeredSecret(t *testing.T) {
	t.Parallel()
	srv, c := newTestServer(t, memoryURL(t), mcpConfig{
		AllowExecute: true,
		Network:      &sandbox.NetworkPolicy{Allow: []string{"api.example.com"}},
		Brokered:     []sandbox.BrokeredSecret{{Value: cliBrokered, Hosts: []string{"api.example.com"}, Env: "API_KEY", Format: "Bearer %s"}},
	})
	cs := connect(t, srv, nil)
	res := call(t, cs, "execute", map[string]any{"command": "env; echo " + cliBrokered})
	out := text(res)
	if !strings.Contains(out, "API_KEY=SBX_BROKERED_API_KEY_") || strings.Contains(out, cliBrokered) {
		t.Fatalf("execute: %q", out)
	}
	ctx := context.Background()
	for info, err := range c.List(ctx, sandbox.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if info.Network == nil || info.Network.Mode != sandbox.NetworkAllowList || len(info.BrokeredSecrets) != 1 || info.BrokeredSecrets[0].Hosts[0] != "api.example.com" {
			t.Fatalf("sandbox made by the server: %+v %+v", info.Network, info.BrokeredSecrets)
		}
	}
}
