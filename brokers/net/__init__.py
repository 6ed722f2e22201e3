"""What every node-to-node gRPC link shares: channel and server options (``channels.py``)
and the test-only link fault hook (``faults.py``).  Imports nothing from ``brokers``, so
the Raft transport, the controller client and replica fetching can all use it."""
