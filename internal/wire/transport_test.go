package wire

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type otherRT struct{}

func (otherRT) RoundTrip(*http.Request) (*http.Response, error) { return nil, http.ErrNotSupported }

// TestTransportOneMeaning: what WithTransport means on every HTTP adapter.
func TestTransportOneMeaning(t *testing.T) {
	rt, counting := Transport(nil)
	ht, ok := rt.(*http.Transport)
	require.True(t, ok, "default is %T, want *http.Transport", rt)
	assert.True(t, counting)
	assert.True(t, ht.DisableCompression)
	assert.NotSame(t, http.DefaultTransport, rt, "the default transport is shared, not cloned")

	given := &http.Transport{MaxConnsPerHost: 3}
	rt, counting = Transport(given)
	ht, ok = rt.(*http.Transport)
	require.True(t, ok)
	assert.NotSame(t, given, ht, "the caller's transport is changed in place")
	assert.False(t, given.DisableCompression, "the caller's transport is changed in place")
	assert.True(t, counting)
	assert.True(t, ht.DisableCompression)
	assert.Equal(t, 3, ht.MaxConnsPerHost)
	assert.NotNil(t, ht.DialContext, "writes are not counted")

	rt, counting = Transport(otherRT{})
	assert.Equal(t, otherRT{}, rt)
	assert.False(t, counting)
}
