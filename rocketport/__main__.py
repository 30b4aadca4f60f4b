import sys

from rocketport.cli import main

sys.exit(main())
