package policy

// String is the verdict as `images ls` shows it: "verified by key K",
// "accepted", "rejected by policy: REASON", or "unsigned, rejected by
// policy: REASON" when it came with no signature at all.
func (v Verdict) String() string {
	switch v.Decision {
	case Verified:
		return "verified by " + v.By
	case Rejected:
		if v.Unsigned {
			return "unsigned, rejected by policy: " + v.Reason
		}
		return "rejected by policy: " + v.Reason
	}
	return string(v.Decision)
}
