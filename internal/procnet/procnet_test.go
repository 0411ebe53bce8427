package procnet

import "testing"

func TestListeningParsesProcNetTCP(t *testing.T) {
	t.Parallel()
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0050 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0000000000000000 20 4 30 10 -1
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:2328 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 100 0 0 10 0
`
	for port, want := range map[int]bool{8000: true, 9000: true, 80: false, 40000: false} {
		if got := Listening(table, port); got != want {
			t.Errorf("Listening(%d) = %v, want %v", port, got, want)
		}
	}
}
