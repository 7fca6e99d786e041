"""The frameworks' own code: where it runs to judge a spec (judge.py) and what runs there
(payload/: verl's and OpenRLHF's start-up checks and the memory plan's facts, run in the
framework's Python, never imported by clusterctl)."""
