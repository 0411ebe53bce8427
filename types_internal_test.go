package sandbox

import (
	"io/fs"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUserTypesBelongToThisPackage: the value types users hold are this
// package's own, not aliases of the driver contract's, so a change to
// package driver cannot change the user's API.
func TestUserTypesBelongToThisPackage(t *testing.T) {
	t.Parallel()
	const self = "github.com/sandboxkit/sandbox"
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Info](), reflect.TypeFor[State](), reflect.TypeFor[FileInfo](),
		reflect.TypeFor[Capabilities](), reflect.TypeFor[Resources](),
		reflect.TypeFor[ExposeOptions](), reflect.TypeFor[Endpoint](),
	} {
		assert.Equal(t, self, typ.PkgPath(), "sandbox.%s is declared in %s", typ.Name(), typ.PkgPath())
	}
}

// fill sets every field of the struct v points to a non-zero value.
func fill(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch {
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(time.Unix(int64(1000+i), 0)))
		case f.Type() == reflect.TypeFor[http.Header]():
			f.Set(reflect.ValueOf(http.Header{"Authorization": {"token"}}))
		case f.Type() == reflect.TypeFor[fs.FileMode]():
			f.Set(reflect.ValueOf(fs.ModeDir | 0o750))
		case f.Kind() == reflect.String:
			f.SetString("v" + rv.Type().Field(i).Name)
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
			f.SetInt(int64(7 + i))
		case f.Kind() == reflect.Map && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("v"))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			sl := reflect.MakeSlice(f.Type(), 1, 1)
			sl.Index(0).SetString("v" + rv.Type().Field(i).Name)
			f.Set(sl)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			sl := reflect.MakeSlice(f.Type(), 1, 1)
			fill(t, sl.Index(0).Addr().Interface())
			f.Set(sl)
		case f.Kind() == reflect.Func:
			f.Set(reflect.MakeFunc(f.Type(), func([]reflect.Value) []reflect.Value {
				out := make([]reflect.Value, f.Type().NumOut())
				for j := range out {
					out[j] = reflect.Zero(f.Type().Out(j))
				}
				return out
			}))
		case f.Kind() == reflect.Struct:
			fill(t, f.Addr().Interface())
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
			f.Set(reflect.New(f.Type().Elem()))
			fill(t, f.Interface())
		default:
			t.Fatalf("fill: no value for %s.%s (%s): teach the test", rv.Type(), rv.Type().Field(i).Name, f.Type())
		}
	}
}

// sameFields checks that user has every field of d, with an equal value,
// apart from the names in skip.
func sameFields(t *testing.T, d, user any, skip ...string) {
	t.Helper()
	dv, uv := reflect.ValueOf(d), reflect.ValueOf(user)
	for i := range dv.NumField() {
		name := dv.Type().Field(i).Name
		if slices.Contains(skip, name) {
			continue
		}
		uf := uv.FieldByName(name)
		require.True(t, uf.IsValid(), "%s has field %s; %s does not (the conversion drops it)", dv.Type(), name, uv.Type())
		df := dv.Field(i)
		if df.Kind() == reflect.Slice && uf.Kind() == reflect.Slice && df.Type().Elem().Kind() == reflect.String && uf.Type().Elem().Kind() == reflect.String {
			// Slices of the two packages' string types ([]driver.SnapshotMode, []SnapshotMode).
			require.Equal(t, df.Len(), uf.Len(), "%s.%s", uv.Type(), name)
			for j := range df.Len() {
				assert.Equal(t, df.Index(j).String(), uf.Index(j).String(), "%s.%s[%d]", uv.Type(), name, j)
			}
			continue
		}
		require.True(t, df.Type().ConvertibleTo(uf.Type()), "%s.%s: %s does not convert to %s", dv.Type(), name, df.Type(), uf.Type())
		assert.Equal(t, df.Convert(uf.Type()).Interface(), uf.Interface(), "%s.%s", uv.Type(), name)
	}
}

// TestConversionsCarryEveryField: the boundary conversions copy every
// field of the driver's types, so a field added to the contract is either
// carried to the user or fails here.
func TestConversionsCarryEveryField(t *testing.T) {
	t.Parallel()
	var in driver.Info
	fill(t, &in)
	out := infoOf(in)
	sameFields(t, in, out, "Network", "Secrets") // Secrets become BrokeredSecrets (names and hosts, no values)
	// The user's policy folds domains and CIDRs into one list each.
	assert.Equal(t, &NetworkPolicy{
		Mode:  in.Network.Mode,
		Allow: []string{"vAllowDomains", "vAllowCIDRs"},
		Deny:  []string{"vDenyDomains", "vDenyCIDRs"},
	}, out.Network)

	var fi driver.FileInfo
	fill(t, &fi)
	sameFields(t, fi, fileInfoOf(fi))

	var ep driver.Endpoint
	fill(t, &ep)
	// Check is carried unexported, for Endpoint.Transport.
	sameFields(t, ep, endpointOf(ep), "Check")
	assert.NotNil(t, endpointOf(ep).check, "endpointOf drops driver.Endpoint.Check")

	var caps driver.Capabilities
	fill(t, &caps)
	// WatchLatency belongs to the directory-watch capability, carried by
	// its own change.
	sameFields(t, caps, capabilitiesOf(caps), "WatchLatency")

	var sn driver.SnapshotInfo
	fill(t, &sn)
	sameFields(t, sn, snapshotOf(sn))

	var r Resources
	fill(t, &r)
	sameFields(t, r, r.toDriver())

	var o ExposeOptions
	fill(t, &o)
	sameFields(t, o, o.toDriver())

	assert.Equal(t, []driver.State{driver.StatePaused, driver.StateRunning}, statesToDriver([]State{StatePaused, StateRunning}))
	assert.Nil(t, statesToDriver(nil))
}

// TestInfoOfCopiesMaps: the user's Info does not share the driver's maps.
func TestInfoOfCopiesMaps(t *testing.T) {
	t.Parallel()
	d := driver.Info{ID: "a", Labels: map[string]string{"k": "v"}, Detail: map[string]string{"d": "x"}}
	u := infoOf(d)
	u.Labels["k"] = "changed"
	u.Detail["d"] = "changed"
	assert.Equal(t, "v", d.Labels["k"])
	assert.Equal(t, "x", d.Detail["d"])
}
