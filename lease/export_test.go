package lease

// SetMaxGeneration sets the highest generation s remembers for owner, so
// tests can reach MaxGeneration.
func (s *MemoryStore) SetMaxGeneration(owner OwnerHash, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.owners[owner]
	if rec == nil {
		rec = &ownerRecord{}
		s.owners[owner] = rec
	}
	rec.maxGen = gen
}
