# The program `vsh demo` runs: summarise the to-do list and update a greeting.
from pathlib import Path

root = Path('/workspace')
todo = (root / 'notes' / 'todo.txt').read_text()
items = [line[2:] for line in todo.splitlines() if line.startswith('- ')]
(root / 'notes' / 'summary.txt').write_text(f'{len(items)} open items\n' + '\n'.join(items) + '\n')

greeting = (root / 'src' / 'greeting.txt').read_text()
(root / 'src' / 'greeting.txt').write_text(greeting.replace('world', 'vsh'))

print('summarised', len(items), 'items')
{'items': len(items), 'files': sorted(p.name for p in root.iterdir())}
