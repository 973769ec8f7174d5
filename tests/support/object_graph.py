"""Walk everything an object can reach: how capability tests prove a component holds no handle."""

from collections.abc import Iterator


def reachable(root: object) -> Iterator[object]:
    """Every object reachable from `root` through attributes, slots, containers and closures."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, (str, bytes, int, float, bool, type(None), type)):
            continue
        seen.add(id(item))
        yield item
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple, set, frozenset)) or type(item).__name__ == "deque":
            stack += list(item)
        elif hasattr(item, "__self__") and hasattr(item, "__func__"):
            stack.append(item.__self__)
        elif callable(item) and getattr(item, "__closure__", None):
            stack += [cell.cell_contents for cell in item.__closure__]
        if hasattr(item, "__dict__") and not isinstance(item, type):
            stack.append(vars(item))
        for cls in type(item).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if hasattr(item, slot):
                    stack.append(getattr(item, slot))
