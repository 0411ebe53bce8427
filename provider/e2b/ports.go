package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// OptPublicTraffic is the provider option ("true"/"false") that makes a
// sandbox's user ports reachable without the traffic access token
// (default false when the sandbox is secure).
const OptPublicTraffic = "public_traffic"

// trafficHeader carries a sandbox's traffic access token to its user
// ports, when it was created with public traffic restricted.
const trafficHeader = "E2b-Traffic-Access-Token"

// Expose returns the edge's address of port, as the SDKs' getHost:
// https://<port>-<id>.<domain>. With a sandbox URL override (E2B_SANDBOX_URL,
// WithSandboxURL: a local edge or a fake) it is that URL, routed by the
// E2b-Sandbox-Id and E2b-Sandbox-Port headers as the edge proxy routes
// requests to an IP literal or localhost. The traffic access token the
// create answered with, if any, is sent as e2b-traffic-access-token (the
// edge refuses a request without it with 403); a sandbox created with
// public traffic has none and its endpoints are Public. The edge answers
// 502 for a port nothing listens on, which the endpoint's Check reads as
// FailedPrecondition. MaxConns and IdleTimeout are the edge's: the
// endpoint reports none.
func (r *Runtime) Expose(ctx context.Context, id string, port int, _ driver.ExposeOptions) (driver.Endpoint, error) {
	c, err := r.conn(ctx, id)
	if err != nil {
		return driver.Endpoint{}, err
	}
	ep := driver.Endpoint{Port: port}
	h := http.Header{}
	if r.cfg.sandboxURL != "" {
		ep.URL = r.cfg.sandboxURL
		h.Set("E2b-Sandbox-Id", id)
		h.Set("E2b-Sandbox-Port", strconv.Itoa(port))
	} else {
		domain := c.domain
		if domain == "" {
			domain = r.cfg.domain
		}
		ep.URL = "https://" + strconv.Itoa(port) + "-" + id + "." + domain
	}
	if c.traffic != "" {
		h.Set(trafficHeader, c.traffic)
	} else {
		// Created with public traffic: the edge serves anyone.
		ep.Public = true
	}
	if len(h) > 0 {
		ep.Header = h
	}
	ep.Check = edgeCheck(port)
	return ep, nil
}

// edgeBodyMax bounds the body edgeCheck reads: the edge's error bodies
// are a few dozen bytes.
const edgeBodyMax = 4 << 10

// edgeCheck tells the edge's own answer for a port nothing listens on
// (502 with a JSON body {"sandboxId","message":"The sandbox is running
// but port is not open","port","code":502}) from the server's responses
// (driver.Endpoint.Check). It reads at most edgeBodyMax bytes of a 502
// with a JSON body, and gives the body back whole when the response is
// the server's.
func edgeCheck(port int) func(*http.Response) error {
	return func(resp *http.Response) error {
		if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			return nil
		}
		head, err := io.ReadAll(io.LimitReader(resp.Body, edgeBodyMax))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		if err != nil {
			return nil
		}
		var e struct {
			Message string `json:"message"`
			Port    *int   `json:"port"`
		}
		if json.Unmarshal(head, &e) != nil || e.Port == nil || *e.Port != port || !strings.Contains(e.Message, "port is not open") {
			return nil
		}
		return sberrors.Errorf(sberrors.FailedPrecondition, "e2b: nothing accepts connections on port %d in the sandbox (the edge answered 502: %s)", port, e.Message)
	}
}

// rememberTraffic records the traffic access token a create or resume
// answered with (nil: unchanged).
func (r *Runtime) rememberTraffic(id string, tok *string) {
	if tok == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.conns[id]; c != nil {
		nc := *c
		nc.traffic = *tok
		r.conns[id] = &nc
	}
}
