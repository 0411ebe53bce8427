package bench

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/docker"
)

// dockerEnv returns a Client on the engine named by SANDBOX_TEST_DOCKER, a
// raw engine client for the baselines, and the test image; it skips
// without an engine.
func dockerEnv(b *testing.B) (*sandbox.Client, *client.Client, string) {
	host := os.Getenv("SANDBOX_TEST_DOCKER")
	if host == "" {
		b.Skip("no Docker engine: set SANDBOX_TEST_DOCKER to its socket (see .ci/run)")
	}
	image := os.Getenv("SANDBOX_TEST_DOCKER_IMAGE")
	if image == "" {
		image = "sandboxkit/busybox:test"
	}
	rt, err := docker.New(docker.WithHost(host), docker.WithImage(image))
	if err != nil {
		b.Fatal(err)
	}
	c := sandbox.NewClient(rt)
	b.Cleanup(func() { c.Close() })
	raw, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { raw.Close() })
	return c, raw, image
}

// rawExec runs argv through the engine's exec API the plain way: create,
// attach, demultiplex into discard, read the exit code.
func rawExec(ctx context.Context, cli *client.Client, id string, argv ...string) error {
	res, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return err
	}
	att, err := cli.ExecAttach(ctx, res.ID, client.ExecAttachOptions{})
	if err != nil {
		return err
	}
	_, err = stdcopy.StdCopy(io.Discard, io.Discard, att.Reader)
	att.Close()
	if err != nil {
		return err
	}
	ins, err := cli.ExecInspect(ctx, res.ID, client.ExecInspectOptions{})
	if err != nil {
		return err
	}
	if ins.ExitCode != 0 {
		return fmt.Errorf("exit %d", ins.ExitCode)
	}
	return nil
}

// BenchmarkDockerExec: `true` through the Client (the wrapper with its
// watchdog, the timeout sent) versus a raw exec of `true` through the same
// engine client. Goal ≤ 1.2×.
func BenchmarkDockerExec(b *testing.B) {
	ctx := context.Background()
	c, raw, _ := dockerEnv(b)
	sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"bench": "exec"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Destroy(context.Background()) })
	cmd := sandbox.Command{Args: []string{"true"}}
	interleave(b, "exec",
		func() error { return rawExec(ctx, raw, sb.ID(), "true") },
		func() error { _, err := sb.Exec(ctx, cmd); return err })
}

// BenchmarkDockerCreate: create + first exec + destroy through the Client
// versus the raw create, start, exec and forced remove of a container of
// the same image with --init and --network none.
func BenchmarkDockerCreate(b *testing.B) {
	ctx := context.Background()
	c, raw, image := dockerEnv(b)
	yes := true
	interleave(b, "create+exec",
		func() error {
			res, err := raw.ContainerCreate(ctx, client.ContainerCreateOptions{
				Config:     &container.Config{Image: image, Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"while :; do sleep 3600; done"}},
				HostConfig: &container.HostConfig{Init: &yes, NetworkMode: "none"},
			})
			if err != nil {
				return err
			}
			defer raw.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true})
			if _, err := raw.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
				return err
			}
			return rawExec(ctx, raw, res.ID, "true")
		},
		func() error {
			sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"bench": "create"}})
			if err != nil {
				return err
			}
			defer sb.Destroy(ctx)
			_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
			return err
		})
}

// BenchmarkDockerTransfer: a 256 MiB upload and download through the
// Client versus the engine's archive endpoint with a tar stream (raw).
// Targets: heap growth during the Client's transfers ≤ 16 MiB.
func BenchmarkDockerTransfer(b *testing.B) {
	const size = 256 << 20
	ctx := context.Background()
	c, raw, _ := dockerEnv(b)
	sb, err := c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"bench": "transfer"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Destroy(context.Background()) })
	home := sb.Home()
	rawUpload := func() error {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			err := tw.WriteHeader(&tar.Header{Name: "raw.bin", Mode: 0o644, Size: size, Uid: 1000, Gid: 1000})
			if err == nil {
				_, err = io.Copy(tw, io.LimitReader(&pattern{}, size))
			}
			if err == nil {
				err = tw.Close()
			}
			pw.CloseWithError(err)
		}()
		_, err := raw.CopyToContainer(ctx, sb.ID(), client.CopyToContainerOptions{DestinationPath: home, Content: pr})
		pr.Close()
		return err
	}
	rawDownload := func() error {
		res, err := raw.CopyFromContainer(ctx, sb.ID(), client.CopyFromContainerOptions{SourcePath: home + "/raw.bin"})
		if err != nil {
			return err
		}
		defer res.Content.Close()
		tr := tar.NewReader(res.Content)
		if _, err := tr.Next(); err != nil {
			return err
		}
		got, err := io.Copy(io.Discard, tr)
		if err == nil && got != size {
			err = fmt.Errorf("raw download: %d bytes", got)
		}
		return err
	}
	var rawUp, upT, rawDown, downT time.Duration
	var upHeap, downHeap uint64
	n := 0
	for b.Loop() {
		t0 := time.Now()
		if err := rawUpload(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		h, err := heapPeak(func() error { return sb.Upload(ctx, "sdk.bin", io.LimitReader(&pattern{}, size)) })
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		upHeap = max(upHeap, h)
		if err := rawDownload(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		h, err = heapPeak(func() error {
			rc, err := sb.Download(ctx, "sdk.bin")
			if err != nil {
				return err
			}
			defer rc.Close()
			got, err := io.Copy(io.Discard, rc)
			if err == nil && got != size {
				err = fmt.Errorf("downloaded %d bytes", got)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		downHeap = max(downHeap, h)
		rawUp, upT, rawDown, downT = rawUp+t1.Sub(t0), upT+t2.Sub(t1), rawDown+t3.Sub(t2), downT+t4.Sub(t3)
		n++
	}
	reportTransfer(b, n, size, rawUp, upT, rawDown, downT, upHeap, downHeap)
}
