package daytonafake

// ResetIdleConnections resets (TCP RST) every idle keep-alive connection
// to the fake, before any request on it is read, and returns how many it
// reset. A client's next write on such a connection fails at once instead
// of being accepted by its kernel, so the client can tell that nothing was
// sent. This is what FaultResetBeforeAdmission does.
func (s *Server) ResetIdleConnections() int {
	return s.conns.ResetIdle(func(string) bool { return true })
}
