package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// openRaw sends an initialize POST and returns its status and the session
// id the server gave (empty when none).
func openRaw(hc *http.Client, endpoint string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(initializeBody))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get(sessionIDHeader), nil
}

// deleteRaw ends a session with HTTP DELETE.
func deleteRaw(hc *http.Client, endpoint, id string) error {
	req, err := http.NewRequest(http.MethodDelete, endpoint, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set(sessionIDHeader, id)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("DELETE: %s", resp.Status)
	}
	return nil
}

// TestMCPHTTPSessionCapExact opens 60 sessions at once with raw initialize
// POSTs, for caps of 1 and 3: exactly the cap get a session, the rest get
// 429; the server holds no more than the cap; once those end (DELETE), as
// many open again.
func TestMCPHTTPSessionCapExact(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 3} {
		t.Run(fmt.Sprint("cap", limit), func(t *testing.T) {
			srv, _ := newTestServer(t, memoryURL(t), mcpConfig{})
			endpoint := httpServer(t, srv, httpOptions{Tokens: []string{testToken}, MaxSessions: limit})
			hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: time.Minute}
			defer hc.CloseIdleConnections()
			for round := range 3 {
				const n = 60
				var (
					mu      sync.Mutex
					ids     []string
					refused int
					wg      sync.WaitGroup
				)
				start := make(chan struct{})
				for range n {
					wg.Go(func() {
						<-start
						code, id, err := openRaw(hc, endpoint)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err != nil:
							t.Errorf("initialize: %v", err)
						case code == http.StatusOK && id != "":
							ids = append(ids, id)
						case code == http.StatusTooManyRequests:
							refused++
						default:
							t.Errorf("initialize: status %d, session %q", code, id)
						}
					})
				}
				close(start)
				wg.Wait()
				if len(ids) != limit || refused != n-limit {
					t.Fatalf("round %d: %d concurrent opens with a cap of %d: %d opened, %d refused", round, n, limit, len(ids), refused)
				}
				if got := countSessions(srv); got > limit {
					t.Fatalf("round %d: the server holds %d sessions, cap %d", round, got, limit)
				}
				for _, id := range ids {
					if err := deleteRaw(hc, endpoint, id); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
