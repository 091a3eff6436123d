"""Linear Road (Arasu et al., VLDB 2004; docs/linear-road.md): a seeded input generator
(`generator`), an independent validator computing the expected notifications (`validator`),
and ``cq linear-road`` (`cli`)."""
