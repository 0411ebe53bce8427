package e2b

import (
	"net/http"
	"testing"
)

// TestRouteMissing: which answers to a v2 request mean the server lacks
// the route (fall back) and which are the route's own answer (report it).
func TestRouteMissing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status int
		body   string
		want   bool
	}{
		// E2B's API before the v2 routes (its request validator).
		{http.StatusBadRequest, `{"code":400,"message":"validation error: method not allowed"}`, true},
		{http.StatusNotFound, `{"code":404,"message":"validation error: no matching operation was found"}`, true},
		// Other servers' routers.
		{http.StatusMethodNotAllowed, ``, true},
		{http.StatusMethodNotAllowed, `{"code":405,"message":"Method Not Allowed"}`, true},
		{http.StatusNotImplemented, `not implemented`, true},
		{http.StatusNotFound, "404 page not found\n", true},
		{http.StatusNotFound, ``, true},
		{http.StatusNotFound, `{"detail":"Not Found"}`, true},
		// The route's own answers.
		{http.StatusNotFound, `{"code":404,"message":"Sandbox \"iabc\" doesn't exist or you don't have access to it"}`, false},
		{http.StatusNotFound, `{"code":404,"message":"template 'x' not found"}`, false},
		{http.StatusBadRequest, `{"code":400,"message":"Timeout cannot be greater than 1 hours"}`, false},
		{http.StatusBadRequest, `bad request`, false},
		{http.StatusConflict, `{"code":409,"message":"method not allowed"}`, false},
		{http.StatusInternalServerError, ``, false},
		{http.StatusCreated, `{}`, false},
	} {
		if got := routeMissing(c.status, []byte(c.body)); got != c.want {
			t.Errorf("%d %q: route missing %v, want %v", c.status, c.body, got, c.want)
		}
	}
}
