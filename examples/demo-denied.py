# A program that tries to read a secret: the guest sees PermissionError, and the
# transaction is denied even though the program caught the error.
from pathlib import Path

try:
    Path('/workspace/.env').read_text()
except PermissionError as error:
    print('refused:', error)
Path('/workspace/notes/leak.txt').write_text('nothing to leak')
