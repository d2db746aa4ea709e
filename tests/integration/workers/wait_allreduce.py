# An MPI rank (mpi4py) that joins MPI on every host, waits for the go file (argv[1]) that the test
# creates once it has done its damage (an agent or coordinator killed and back), then allreduces
# and says whether the sum is right. Used by tests/integration/faults/ (netns_lib.sh's
# write_mpi_survivor_job).
import os
import socket
import sys
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
comm.Barrier()  # every rank is up, on every host
print(f"rank {rank} ready on {socket.gethostname()}", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
print(f"rank {rank} after the restart on {socket.gethostname()}", flush=True)
total = comm.allreduce(rank + 1)
expected = size * (size + 1) // 2
print(f"rank {rank} of {size}: allreduce sum {total} (expected {expected}) "
      f"{'OK' if total == expected else 'WRONG'}", flush=True)
